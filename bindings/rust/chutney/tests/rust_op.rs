//! An op library written in Rust (bindings/rust/examples/rust-op, a cdylib) loaded by chutney:
//! its op is inferred, differentiated, compiled onto the CPU backend, trained through next to
//! built-in ops, and its errors arrive with the op library's messages. The library must be
//! built first: the stage's `cargo build --all-targets` (or `cargo build -p chutney-rust-op`).
use chutney::{Context, Dtype, Status, Tensor};
use std::path::PathBuf;

fn library() -> PathBuf {
    // This test runs as <target>/debug/deps/rust_op-<hash>; `cargo test` leaves the op library
    // in deps/ (it builds the crate's rlib + cdylib for its doctests), `cargo build` in debug/.
    let deps = std::env::current_exe().unwrap().parent().unwrap().to_path_buf();
    let found = [deps.join("libctn_rust_op.so"), deps.parent().unwrap().join("libctn_rust_op.so")]
        .into_iter()
        .filter(|p| p.exists())
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    found.unwrap_or_else(|| panic!("no libctn_rust_op.so under {}: cargo build --offline -p chutney-rust-op", deps.display()))
}

fn softsign(x: f64) -> f64 {
    x / (1.0 + x.abs())
}

#[test]
fn an_op_written_in_rust_is_loaded_differentiated_and_trained() {
    let lib = library();
    let needed = std::process::Command::new("readelf").arg("-d").arg(&lib).output();
    if let Ok(o) = needed {
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(!text.contains("libchutney"), "the op library links libchutney:\n{text}");
    }
    let mut ctx = Context::new().unwrap();
    ctx.load_plugin(&lib).unwrap();
    assert!(ctx.plugin_report().unwrap().contains("libctn_rust_op.so"));

    // forward, eagerly, f32 and f64
    {
        let g = ctx.eager_graph().unwrap();
        let xs = [-3.0f64, -0.5, 0.0, 0.25, 2.0, 10.0];
        let x = g.constant(&Tensor::new(&xs, &[2, 3]).unwrap()).unwrap();
        let y = g.op("rust_softsign", &[x], None).unwrap();
        assert_eq!(g.node_backend(y).unwrap(), "cpu");
        let want: Vec<f64> = xs.iter().map(|&v| softsign(v)).collect();
        assert_eq!(g.value(y).unwrap().to_vec::<f64>().unwrap(), want);
        let x32 = g.cast(x, Dtype::F32).unwrap();
        let y32 = g.op("rust_softsign", &[x32], None).unwrap();
        assert_eq!(g.value(y32).unwrap().to_vec::<f32>().unwrap()[4], 2.0f32 / 3.0);
        // errors from the library's infer, with its message
        let xi = g.cast(x, Dtype::I32).unwrap();
        let e = g.op("rust_softsign", &[xi], None).unwrap_err();
        assert_eq!(e.status(), Status::DTYPE);
        assert!(e.message().contains("rust_softsign"), "{e}");
        assert!(g.op("rust_softsign", &[x, x], None).is_err());
        // the gradient against finite differences
        let w = g.variable("w", &Tensor::new(&[-1.5f64, 0.3, 2.0], &[3]).unwrap()).unwrap();
        let l = g.sum(g.op("rust_softsign", &[w], None).unwrap(), &[], false).unwrap();
        let dw = g.value(g.grad(l, &[w]).unwrap()[0]).unwrap().to_vec::<f64>().unwrap();
        for (d, v) in dw.iter().zip([-1.5f64, 0.3, 2.0]) {
            let fd = (softsign(v + 1e-6) - softsign(v - 1e-6)) / 2e-6;
            assert!((d - fd).abs() < 1e-6, "d/dw at {v}: {d} vs {fd}");
        }
    }

    // trained through in a compiled plan next to built-in ops: softsign(w * x) -> targets
    let g = ctx.graph().unwrap();
    let x = g.input("x", Dtype::F32, &[4]).unwrap();
    let t = g.input("t", Dtype::F32, &[4]).unwrap();
    let w = g.variable("w", &Tensor::new(&[0.1f32], &[1]).unwrap()).unwrap();
    let y = g.op("rust_softsign", &[w * x], None).unwrap();
    let d = y - t;
    let loss = g.mean(d * d, &[], false).unwrap();
    let dw = g.grad(loss, &[w]).unwrap()[0];
    g.assign(w, w - dw * 2.0).unwrap();
    let mut plan = g.compile(&[loss]).unwrap();
    assert_eq!(plan.backend_steps("cpu", Some("rust_softsign")).unwrap(), 1, "{}", plan.describe().unwrap());
    let xs = [0.5f32, 1.0, -1.0, 2.0];
    let ts: Vec<f32> = xs.iter().map(|&v| softsign(1.5 * v as f64) as f32).collect(); // true w = 1.5
    let (xv, tv) = (Tensor::new(&xs, &[4]).unwrap(), Tensor::new(&ts, &[4]).unwrap());
    let mut lv = plan.output(0).unwrap();
    let mut first = None;
    for _ in 0..300 {
        plan.run(&[(x.id(), &xv), (t.id(), &tv)], &mut [&mut lv]).unwrap();
        first.get_or_insert(lv.item::<f32>().unwrap());
    }
    let w_end = plan.variable(w.id()).unwrap().item::<f32>().unwrap();
    assert!((w_end - 1.5).abs() < 1e-2, "w = {w_end}");
    assert!(lv.item::<f32>().unwrap() < first.unwrap() * 1e-3);
}
