//! The ABI 1.5 dtypes: `f16`/`bf16` conversions (PyTorch's values, and every one of the 65,536
//! bit patterns against round-to-nearest-even), tensors of `f16`, `bf16` and `i8` bit for bit,
//! dtype mismatches refused, and a checkpoint round trip.
use chutney::checkpoint::{self, Checkpoint};
use chutney::{bf16, f16, Dtype, Status, Tensor};

// torch.tensor(v, dtype=torch.float32).to(dt) in PyTorch 2.15: rounding, f16 overflow (65520)
// and underflow (1e-8), the bf16 tie 1 + 2^-8 going to the even 1, the f16 tie 2049 to 2048.
#[test]
fn conversions_match_pytorch() {
    let input = [1.0f32, 0.1, 65520.0, -2.5, 1e-8, 1.0 + 1.0 / 256.0, 2049.0, f32::NEG_INFINITY];
    let f16_bits = [0x3c00u16, 0x2e66, 0x7c00, 0xc100, 0x0000, 0x3c04, 0x6800, 0xfc00];
    let bf16_bits = [0x3f80u16, 0x3dcd, 0x4780, 0xc020, 0x322c, 0x3f80, 0x4500, 0xff80];
    for (i, &x) in input.iter().enumerate() {
        assert_eq!(f16::from_f32(x).to_bits(), f16_bits[i], "f16 of {x}");
        assert_eq!(bf16::from_f32(x).to_bits(), bf16_bits[i], "bf16 of {x}");
    }
    assert_eq!(f16::from_bits(0x0001).to_f32(), 5.9604645e-8);
    assert_eq!(f16::from_bits(0x7bff).to_f32(), 65504.0);
    assert!(f16::from_bits(0x8000).to_f32().is_sign_negative());
    assert!(f16::from_f32(f32::NAN).to_f32().is_nan());
    // A NaN whose payload is only in the low bits must not truncate to infinity.
    assert!(bf16::from_f32(f32::from_bits(0x7f80_0001)).to_f32().is_nan());
    assert_eq!(f32::from(bf16::from_bits(0xc020)), -2.5);
}

fn next_toward(x: f32, toward: f32) -> f32 {
    // The neighbouring f32 of x in the direction of `toward` (x finite, x != toward).
    let b = x.to_bits();
    let up = (toward > x) == (x >= 0.0);
    if x == 0.0 {
        return if toward > 0.0 { f32::from_bits(1) } else { -f32::from_bits(1) };
    }
    f32::from_bits(if up { b + 1 } else { b - 1 })
}

fn exhaustive(name: &str, to: fn(f32) -> u16, from: fn(u16) -> f32, largest_finite: u32) {
    let mut bad = 0;
    for h in 0u32..0x10000 {
        let v = from(h as u16);
        if v.is_nan() {
            assert!(from(to(v)).is_nan(), "{name}: NaN {h:#06x}");
            continue;
        }
        if to(v) != h as u16 {
            bad += 1;
            eprintln!("{name}: {h:#06x} -> {v} -> {:#06x}", to(v));
        }
        if h & 0x7fff >= largest_finite {
            continue; // its neighbour is infinity (or v is infinite)
        }
        let next = from((h + 1) as u16);
        let mid = ((v as f64 + next as f64) / 2.0) as f32; // exact for both formats
        let even = if h & 1 == 1 { h + 1 } else { h } as u16;
        let (below, above) = (next_toward(mid, v), next_toward(mid, next));
        if to(mid) != even || to(below) != h as u16 || to(above) != (h + 1) as u16 {
            bad += 1;
            eprintln!("{name}: between {h:#06x} and {:#06x}: mid {:#06x}", h + 1, to(mid));
        }
    }
    assert_eq!(bad, 0, "{name}: {bad} bit patterns wrong");
}

#[test]
fn conversions_round_to_nearest_even_on_every_bit_pattern() {
    exhaustive("f16", |x| f16::from_f32(x).to_bits(), |h| f16::from_bits(h).to_f32(), 0x7bff);
    exhaustive("bf16", |x| bf16::from_f32(x).to_bits(), |h| bf16::from_bits(h).to_f32(), 0x7f7f);
}

#[test]
fn tensors_of_the_new_dtypes_keep_their_bits() {
    let bits = [0x3c00u16, 0xc000, 0x7bff, 0x0001, 0x8000, 0x7e01];
    let h: Vec<f16> = bits.iter().map(|&b| f16::from_bits(b)).collect();
    let t = Tensor::new(&h, &[2, 3]).unwrap();
    assert_eq!(t.dtype().unwrap(), Dtype::F16);
    assert_eq!((Dtype::F16.size(), Dtype::F16.name()), (2, "f16".to_string()));
    assert_eq!((Dtype::BF16.size(), Dtype::BF16.name()), (2, "bf16".to_string()));
    assert_eq!((Dtype::I8.size(), Dtype::I8.name()), (1, "i8".to_string()));
    assert_eq!(t.to_vec::<f16>().unwrap(), h);
    // No silent conversion: reading an f16 tensor as f32, u16-sized bf16 or i8 is refused.
    assert_eq!(t.to_vec::<f32>().unwrap_err().status(), Status::DTYPE);
    assert_eq!(t.to_vec::<bf16>().unwrap_err().status(), Status::DTYPE);

    let mut b = Tensor::new(&[bf16::from_f32(1.5), bf16::from_f32(-0.1)], &[2]).unwrap();
    assert_eq!(b.dtype().unwrap(), Dtype::BF16);
    let got: Vec<u16> = b.to_vec::<bf16>().unwrap().iter().map(|x| x.to_bits()).collect();
    assert_eq!(got, [0x3fc0, 0xbdcd]);
    b.write(&[bf16::from_bits(0x4000), bf16::default()]).unwrap();
    assert_eq!(b.to_vec::<bf16>().unwrap().iter().map(|x| x.to_f32()).collect::<Vec<_>>(), [2.0, 0.0]);
    assert_eq!(b.item::<bf16>().unwrap_err().status(), Status::SHAPE);

    let q = Tensor::new(&[-128i8, -1, 0, 127], &[4]).unwrap();
    assert_eq!(q.dtype().unwrap(), Dtype::I8);
    assert_eq!(q.to_vec::<i8>().unwrap(), [-128, -1, 0, 127]);
    assert_eq!(Tensor::scalar(-7i8).unwrap().item::<i8>().unwrap(), -7);
    assert_eq!(Tensor::zeros(Dtype::F16, &[3]).unwrap().to_vec::<f16>().unwrap(), [f16::default(); 3]);

    // A strided view reads row-major.
    let v = t.slice(1, 0, 3, 2).unwrap();
    let vb: Vec<u16> = v.to_vec::<f16>().unwrap().iter().map(|x| x.to_bits()).collect();
    assert_eq!(vb, [0x3c00, 0x7bff, 0x0001, 0x7e01]);

    // Through a safetensors checkpoint: the dtypes and bits come back.
    let dir = std::env::temp_dir().join(format!("chutney-rust-half-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("half.safetensors");
    checkpoint::save(&path, &[("h", &t), ("b", &b), ("q", &q)], None).unwrap();
    let c = Checkpoint::load(&path).unwrap();
    assert_eq!(c.info("h").unwrap(), (Dtype::F16, vec![2, 3]));
    assert_eq!(c.info("b").unwrap(), (Dtype::BF16, vec![2]));
    assert_eq!(c.info("q").unwrap(), (Dtype::I8, vec![4]));
    assert_eq!(c.get("h").unwrap().to_vec::<f16>().unwrap(), h);
    assert_eq!(c.get("q").unwrap().to_vec::<i8>().unwrap(), [-128, -1, 0, 127]);
    drop(c);
    std::fs::remove_dir_all(&dir).unwrap();
}
