//! ONNX import: a graph exported by the binding loads back and computes the same bits; the model
//! handle's listing; options (constant inputs, constant initializers, inspect only); errors.
use chutney::model_file::export_onnx;
use chutney::onnx::{self, OnnxInput, OnnxOptions};
use chutney::{Context, Dtype, NodeId, Plan, Status, Tensor};
use std::path::{Path, PathBuf};

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("chutney-rs-onnx-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run(plan: &mut Plan<'_>, feeds: &[(NodeId, &Tensor)]) -> Vec<u32> {
    let mut out = plan.output(0).unwrap();
    plan.run(feeds, &mut [&mut out]).unwrap();
    out.to_vec::<f32>().unwrap().into_iter().map(f32::to_bits).collect()
}

#[test]
fn export_then_load_computes_the_same_bits() {
    let ctx = Context::new().unwrap();
    let dir = temp_dir("roundtrip");
    let g = ctx.graph().unwrap();
    let x = g.input("x", Dtype::F32, &[2, 3]).unwrap();
    let w = g.variable("w", &Tensor::new(&[0.1f32, -2.0, 0.5, 3.25, -1.0, 2.0], &[3, 2]).unwrap()).unwrap();
    let b = g.variable("b", &Tensor::new(&[0.3f32, -0.7], &[2]).unwrap()).unwrap();
    let y = g.tanh(g.add(g.relu(g.matmul(x, w, false, false).unwrap()).unwrap(), b).unwrap()).unwrap();
    let xv = Tensor::new(&[1.0f32, 2.0, 3.0, -4.0, 5.5, 6.0], &[2, 3]).unwrap();
    let want = run(&mut g.compile(&[y]).unwrap(), &[(x.into(), &xv)]);
    let path = dir.join("m.onnx");
    export_onnx(&g, None, &[("y", y.into())], &path).unwrap();

    let (g2, m) = onnx::load(&ctx, &path, &OnnxOptions::default()).unwrap();
    let ins = m.inputs().unwrap();
    let outs = m.outputs().unwrap();
    assert_eq!(ins.len(), 1);
    assert_eq!(ins[0].0, "x");
    assert_eq!(outs.len(), 1);
    assert_eq!(outs[0].0, "y");
    let (xid, yid) = (ins[0].1.unwrap(), outs[0].1.unwrap());
    assert_eq!(xid.graph(), g2.serial(), "ids carry the loaded graph");
    let mut inits: Vec<String> = m.initializers().unwrap().into_iter().map(|(n, id)| {
        assert!(id.is_some(), "initializer {n} has no node");
        n
    }).collect();
    inits.sort();
    assert_eq!(inits, vec!["b", "w"]);
    let got = run(&mut g2.compile(&[g2.node(yid).unwrap()]).unwrap(), &[(xid, &xv)]);
    assert_eq!(got, want, "imported model differs from the graph");
    let ops = m.op_types().unwrap();
    for name in ["MatMul", "Relu", "Add", "Tanh"] {
        let op = ops.iter().find(|o| o.name == name).unwrap_or_else(|| panic!("no {name} in {ops:?}"));
        assert!(op.uses == 1 && op.supported && !op.lowered_to.is_empty(), "{op:?}");
    }
    assert_eq!(m.version().unwrap(), (13, 7));
    // An id of the loaded graph is refused by a plan of the original one.
    let mut p1 = g.compile(&[y]).unwrap();
    let mut out = p1.output(0).unwrap();
    assert_eq!(p1.run(&[(xid, &xv)], &mut [&mut out]).unwrap_err().status(), Status::INVALID_ARGUMENT);

    // x bound as a constant, initializers as constants: no input node, no feed.
    let opts = OnnxOptions {
        inputs: vec![OnnxInput { name: "x", value: &xv, as_constant: true }],
        initializers_as_constants: true,
        ..Default::default()
    };
    let (g3, m3) = onnx::load(&ctx, &path, &opts).unwrap();
    assert_eq!(m3.inputs().unwrap(), vec![("x".to_string(), None)]);
    let y3 = m3.outputs().unwrap()[0].1.unwrap();
    assert_eq!(run(&mut g3.compile(&[g3.node(y3).unwrap()]).unwrap(), &[]), want);

    // Inspect only: the listing without nodes.
    let mi = onnx::inspect(&ctx, &path, &OnnxOptions::default()).unwrap();
    assert_eq!(mi.outputs().unwrap(), vec![("y".to_string(), None)]);
    assert!(mi.op_types().unwrap().iter().any(|o| o.name == "MatMul" && o.supported));
    std::fs::remove_dir_all(&dir).unwrap();
}

fn load_err(ctx: &Context, path: &Path, opts: &OnnxOptions<'_>) -> Status {
    onnx::load(ctx, path, opts).err().expect("load succeeded").status()
}

#[test]
fn load_errors() {
    let ctx = Context::new().unwrap();
    let dir = temp_dir("errors");
    let g = ctx.graph().unwrap();
    let x = g.input("x", Dtype::F32, &[2]).unwrap();
    let path = dir.join("relu.onnx");
    export_onnx(&g, None, &[("y", g.relu(x).unwrap().into())], &path).unwrap();
    let v = Tensor::new(&[1.0f32, 2.0], &[2]).unwrap();
    let unknown = OnnxOptions { inputs: vec![OnnxInput { name: "nope", value: &v, as_constant: false }], ..Default::default() };
    assert_eq!(load_err(&ctx, &path, &unknown), Status::INVALID_ARGUMENT);
    let junk = dir.join("junk.onnx");
    std::fs::write(&junk, [0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2]).unwrap();
    assert_eq!(load_err(&ctx, &junk, &OnnxOptions::default()), Status::CORRUPT);
    assert_eq!(load_err(&ctx, &dir.join("missing.onnx"), &OnnxOptions::default()), Status::IO);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A TensorProto written by hand: dims 2x2, FLOAT, name "t", raw_data.
#[test]
fn load_tensor_reads_a_tensor_proto() {
    let dir = temp_dir("tensor");
    let vals = [1.5f32, -2.0, 0.0, 1e-3];
    let mut pb = vec![0x08, 2, 0x08, 2, 0x10, 1, 0x42, 1, b't', 0x4a, 16];
    for v in vals {
        pb.extend_from_slice(&v.to_le_bytes());
    }
    let path = dir.join("input_0.pb");
    std::fs::write(&path, &pb).unwrap();
    let (t, name) = onnx::load_tensor(&path).unwrap();
    assert_eq!(name, "t");
    assert_eq!(t.shape().unwrap(), vec![2, 2]);
    assert_eq!(t.dtype().unwrap(), Dtype::F32);
    assert_eq!(t.to_vec::<f32>().unwrap(), vals.to_vec());
    std::fs::write(&path, &pb[..pb.len() - 4]).unwrap();
    assert_eq!(onnx::load_tensor(&path).err().unwrap().status(), Status::CORRUPT);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The first little-endian float32 array of a .npy file or a stored .npz (the committed files
/// of tests/onnx/models): its shape and values.
fn npy_f32(path: &Path) -> (Vec<i64>, Vec<f32>) {
    let b = std::fs::read(path).unwrap();
    let magic = b"\x93NUMPY\x01\x00";
    let i = b.windows(magic.len()).position(|w| w == magic).expect("no version 1 .npy array");
    let hlen = u16::from_le_bytes([b[i + 8], b[i + 9]]) as usize;
    let header = std::str::from_utf8(&b[i + 10..i + 10 + hlen]).unwrap();
    let prefix = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
    assert!(header.starts_with(prefix), "{header}");
    let dims = &header[prefix.len()..header.find(')').unwrap()];
    let shape: Vec<i64> = dims.split(',').map(str::trim).filter(|d| !d.is_empty()).map(|d| d.parse().unwrap()).collect();
    let n = shape.iter().product::<i64>() as usize;
    let data = &b[i + 10 + hlen..];
    let vals = (0..n).map(|k| f32::from_le_bytes([data[4 * k], data[4 * k + 1], data[4 * k + 2], data[4 * k + 3]])).collect();
    (shape, vals)
}

/// A model exported from PyTorch (tests/onnx/models/mlp.onnx) gives onnxruntime's outputs.
#[test]
fn torch_mlp_matches_onnxruntime() {
    let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/onnx/models");
    let (shape, input) = npy_f32(&models.join("mlp.in.npz"));
    let (_, want) = npy_f32(&models.join("mlp.ort.npy"));
    let ctx = Context::new().unwrap();
    let (g, m) = onnx::load(&ctx, &models.join("mlp.onnx"), &OnnxOptions::default()).unwrap();
    let (ins, outs) = (m.inputs().unwrap(), m.outputs().unwrap());
    assert_eq!((ins.len(), outs.len()), (1, 1));
    assert!(!m.initializers().unwrap().is_empty());
    let xv = Tensor::new(&input, &shape).unwrap();
    let mut plan = g.compile(&[g.node(outs[0].1.unwrap()).unwrap()]).unwrap();
    let got: Vec<f32> = run(&mut plan, &[(ins[0].1.unwrap(), &xv)]).into_iter().map(f32::from_bits).collect();
    assert_eq!(got.len(), want.len());
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= 1e-5 + 1e-3 * w.abs(), "output {k}: {g}, onnxruntime {w}");
    }
}
