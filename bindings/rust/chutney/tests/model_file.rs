//! Whole graphs in one file (save, load, listing, metadata) and ONNX export.
use chutney::model_file;
use chutney::{Context, Dtype, NodeId, Status, Tensor};

#[test]
fn save_load_run_and_export() {
    let ctx = Context::new().unwrap();
    let dir = std::env::temp_dir().join(format!("chutney-rs-model-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let g = ctx.graph().unwrap();
    let x = g.input("x", Dtype::F32, &[2, 3]).unwrap();
    let w0 = Tensor::new(&[1.0f32, -2.0, 0.5, 3.0, -1.0, 2.0], &[3, 2]).unwrap();
    let w = g.variable("w", &w0).unwrap();
    let y = g.relu(g.matmul(x, w, false, false).unwrap()).unwrap();
    let (xid, yid, wid) = (NodeId::from(x), NodeId::from(y), NodeId::from(w));
    let mut plan = g.compile(&[y]).unwrap();
    plan.set_variable(wid, &Tensor::new(&[2.0f32; 6], &[3, 2]).unwrap()).unwrap();
    let path = dir.join("m.ctn");
    model_file::save(&g, Some(&plan), &[("y", yid)], Some(r#"{"task":"rust"}"#), &path).unwrap();

    let (g2, saved) = model_file::load(&ctx, &path).unwrap();
    // The loaded graph keeps the node numbers; its ids are its own (they carry the new graph).
    let names_and_indices = |l: Vec<(String, NodeId)>| l.into_iter().map(|(n, id)| (n, id.index())).collect::<Vec<_>>();
    assert_eq!(names_and_indices(saved.inputs().unwrap()), vec![("x".to_string(), xid.index())]);
    assert_eq!(names_and_indices(saved.outputs().unwrap()), vec![("y".to_string(), yid.index())]);
    assert_eq!(names_and_indices(saved.variables().unwrap()), vec![("w".to_string(), wid.index())]);
    let (xid, yid) = (saved.inputs().unwrap()[0].1, saved.outputs().unwrap()[0].1);
    assert_eq!(xid.graph(), g2.serial());
    assert_eq!(saved.metadata("task").unwrap().as_deref(), Some("rust"));
    assert_eq!(saved.metadata("absent").unwrap(), None);
    let mut p2 = g2.compile(&[g2.node(yid).unwrap()]).unwrap();
    let xv = Tensor::new(&[1.0f32, 2.0, 3.0, -4.0, 5.0, 6.0], &[2, 3]).unwrap();
    let mut out = p2.output(0).unwrap();
    p2.run(&[(xid, &xv)], &mut [&mut out]).unwrap();
    // The plan's w (all 2s) was saved: relu(2 * row sums).
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![12.0, 12.0, 14.0, 14.0]);

    let onnx = dir.join("m.onnx");
    model_file::export_onnx(&g2, None, &[("y", yid)], &onnx).unwrap();
    assert!(std::fs::metadata(&onnx).unwrap().len() > 50);
    let gl = g.gelu(x).unwrap();
    let e = model_file::export_onnx(&g, None, &[("g", gl.into())], &dir.join("bad.onnx")).unwrap_err();
    assert_eq!(e.status(), Status::UNSUPPORTED);
    assert!(e.message().contains("gelu"), "{}", e.message());
    std::fs::write(dir.join("junk.ctn"), b"not a graph file").unwrap();
    let e = model_file::load(&ctx, &dir.join("junk.ctn")).err().unwrap();
    assert_eq!(e.status(), Status::CORRUPT);
    std::fs::remove_dir_all(&dir).unwrap();
}
