//! The ABI 1.6 integer dtypes: tensors of `i16`, `u16`, `u32` and `u64` keep their values
//! (extremes included), reading as another type is refused, a `u16` comparison reads them as
//! unsigned on the CPU, a `u32` -> `i16` cast keeps the low bits (arithmetic is float-only in the
//! graph, as for `i32`), and a checkpoint keeps dtypes and values.
use chutney::checkpoint::{self, Checkpoint};
use chutney::{Context, Dtype, Status, Tensor};

#[test]
fn integer_dtypes_keep_values_and_wrap() {
    let kinds = [(Dtype::I16, 2, "i16"), (Dtype::U16, 2, "u16"), (Dtype::U32, 4, "u32"), (Dtype::U64, 8, "u64")];
    for (d, size, name) in kinds {
        assert_eq!((d.size(), d.name()), (size, name.to_string()));
        assert_eq!(Dtype::from_raw(d.raw()).unwrap(), d);
    }
    let s = Tensor::new(&[i16::MIN, -1, 0, i16::MAX], &[4]).unwrap();
    let w = Tensor::new(&[0u32, 1, 3_000_000_000, u32::MAX], &[4]).unwrap();
    let l = Tensor::new(&[0u64, 1, 1 << 63, u64::MAX], &[4]).unwrap();
    assert_eq!(s.dtype().unwrap(), Dtype::I16);
    assert_eq!(w.dtype().unwrap(), Dtype::U32);
    assert_eq!(l.to_vec::<u64>().unwrap(), [0, 1, 1 << 63, u64::MAX]);
    assert_eq!(l.to_vec::<i64>().unwrap_err().status(), Status::DTYPE);
    assert_eq!(Tensor::scalar(65535u16).unwrap().item::<u16>().unwrap(), 65535);

    let ctx = Context::new().unwrap();
    let g = ctx.graph().unwrap();
    let a = g.input("a", Dtype::U16, &[4]).unwrap();
    let b = g.input("b", Dtype::U16, &[4]).unwrap();
    let x = g.input("x", Dtype::U32, &[4]).unwrap();
    let mut p = g.compile(&[g.compare("lt", a, b).unwrap(), g.cast(x, Dtype::I16).unwrap()]).unwrap();
    let av = Tensor::new(&[0u16, 1, 40000, 65535], &[4]).unwrap();
    let bv = Tensor::new(&[2u16, 65535, 25536, 1], &[4]).unwrap();
    let outs = p.run_outputs(&[(a.id(), &av), (b.id(), &bv), (x.id(), &w)]).unwrap();
    assert_eq!(outs[0].to_bools().unwrap(), [true, true, false, false]); // 65535 < 1 is false
    assert_eq!(outs[1].to_vec::<i16>().unwrap(), [0, 1, 24064, -1]); // the low 16 bits
    drop((p, g));

    let dir = std::env::temp_dir().join(format!("chutney-rust-ints-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ints.safetensors");
    checkpoint::save(&path, &[("s", &s), ("w", &w), ("l", &l)], None).unwrap();
    let c = Checkpoint::load(&path).unwrap();
    assert_eq!(c.info("s").unwrap(), (Dtype::I16, vec![4]));
    assert_eq!(c.get("w").unwrap().to_vec::<u32>().unwrap(), [0, 1, 3_000_000_000, u32::MAX]);
    assert_eq!(c.get("l").unwrap().to_vec::<u64>().unwrap(), [0, 1, 1 << 63, u64::MAX]);
    drop(c);
    std::fs::remove_dir_all(&dir).unwrap();
}
