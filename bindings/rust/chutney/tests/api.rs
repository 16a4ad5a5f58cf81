//! The safe API against the real library: results, errors with the library's messages, no
//! undefined behaviour on wrong shapes, dtypes or nodes, eager mode, views, checkpoints.
use chutney::checkpoint::{self, Checkpoint};
use chutney::{Context, Dtype, Error, Status, Tensor};
use std::path::PathBuf;

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("chutney-rust-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn versions_and_backends() {
    let (major, minor) = chutney::abi_version();
    assert_eq!(major, chutney::sys::CTN_ABI_MAJOR);
    assert!(minor >= chutney::sys::CTN_ABI_MINOR);
    assert_eq!(chutney::version().split('.').count(), 3);
    let ctx = Context::new().unwrap();
    let b = ctx.backends().unwrap();
    assert!(b.iter().any(|b| b.name == "cpu" && b.available), "{b:?}");
    assert!(ctx.plugin_report().unwrap().contains("cpu"));
    // backend selection: unknown names fail, "cpu" works for the context and one compile
    // an unknown name is a usage error naming the known backends
    let e = ctx.set_backends("no-such-backend").unwrap_err();
    assert_eq!(e.status(), Status::INVALID_ARGUMENT);
    assert!(e.message().contains("known backends: cpu"), "{e}");
    ctx.set_backends("cpu").unwrap();
    assert_eq!(ctx.set_option("no-such-backend", "k", "v").unwrap_err().status(), Status::INVALID_ARGUMENT);
    let g = ctx.graph().unwrap();
    let x = g.input("x", Dtype::F32, &[4]).unwrap();
    let o = chutney::CompileOptions { backends: Some("cpu".into()), ..Default::default() };
    let p = g.compile_with(&[g.exp(x).unwrap()], &o).unwrap();
    assert_eq!(p.backend_steps("cpu", Some("exp")).unwrap(), 1);
    let bad = chutney::CompileOptions { backends: Some("no-such-backend".into()), ..Default::default() };
    assert!(g.compile_with(&[x], &bad).is_err());
    // a context that loads nothing cannot prefer the CPU
    let none = Context::with_options(&chutney::Options {
        no_autoload: true,
        backends: Some("cpu".into()),
        ..Default::default()
    });
    let e = none.unwrap_err();
    assert_eq!(e.status(), Status::UNAVAILABLE);
    assert!(e.message().contains("cpu"), "{e}");
    drop((p, g));
    let mut ctx = ctx; // load_plugin needs the context to itself: no graph or plan alive
    assert_eq!(ctx.load_plugin(std::path::Path::new("/nonexistent/ctn-x.so")).unwrap_err().status(), Status::PLUGIN);
}

#[test]
fn graph_errors_carry_the_status_and_the_library_message() {
    let ctx = Context::new().unwrap();
    let g = ctx.graph().unwrap();
    let a = g.input("a", Dtype::F32, &[2, 3]).unwrap();
    let b = g.input("b", Dtype::F32, &[4, 5]).unwrap();
    let e = g.matmul(a, b, false, false).unwrap_err();
    assert_eq!(e.status(), Status::SHAPE);
    assert!(e.to_string().starts_with("CTN_ERR_SHAPE: "), "{e}");
    assert!(e.message().starts_with("matmul"), "{e}");
    assert!(!e.to_string().starts_with("CTN_ERR_SHAPE: CTN_ERR_SHAPE"), "{e}");
    let i = g.input("i", Dtype::I32, &[2, 3]).unwrap();
    assert_eq!(g.add(a, i).unwrap_err().status(), Status::DTYPE);
    // a failed call changes nothing: the graph still works
    assert!(g.add(a, a).is_ok());
    // unknown op, NUL in a name
    assert_eq!(g.op("no_such_op", &[a], None).unwrap_err().status(), Status::INVALID_ARGUMENT);
    assert_eq!(g.input("x\0y", Dtype::F32, &[1]).unwrap_err().status(), Status::INVALID_ARGUMENT);
    // negative dims and too many dims are refused before the library sees them
    assert_eq!(g.input("n", Dtype::F32, &[-1]).unwrap_err().status(), Status::SHAPE);
    assert_eq!(g.input("n", Dtype::F32, &[1; 9]).unwrap_err().status(), Status::SHAPE);
    assert_eq!(g.permute(a, &[0]).unwrap_err().status(), Status::INVALID_ARGUMENT);
}

#[test]
fn nodes_of_another_graph_and_failed_operators_are_errors() {
    let ctx = Context::new().unwrap();
    let g1 = ctx.graph().unwrap();
    let g2 = ctx.graph().unwrap();
    let a = g1.input("a", Dtype::F32, &[2]).unwrap();
    let b = g2.input("b", Dtype::F32, &[2]).unwrap();
    assert_eq!(g1.add(a, b).unwrap_err().status(), Status::INVALID_ARGUMENT);
    assert!(g1.compile(&[b]).is_err());

    let c = g1.input("c", Dtype::F32, &[3]).unwrap();
    let bad = a + c; // shapes [2] and [3] do not broadcast
    let worse = bad * 2.0;
    assert_eq!(g1.relu(worse).unwrap_err().status(), Status::SHAPE);
    let e = g1.compile(&[a]).unwrap_err();
    assert_eq!(e.status(), Status::SHAPE);
    // compile reported (and cleared) the error: the graph is usable again
    assert!(g1.take_error().is_none());
    assert!(g1.compile(&[a + a]).is_ok());
}

/// A node id carries its graph: an id of another graph with the same number is refused by every
/// call that takes ids (it used to be fed as if it were this graph's node).
#[test]
fn node_ids_of_another_graph_with_the_same_number_are_refused() {
    let ctx = Context::new().unwrap();
    let (g1, g2) = (ctx.graph().unwrap(), ctx.graph().unwrap());
    let a = g1.input("a", Dtype::F32, &[2]).unwrap();
    let b = g2.input("b", Dtype::F32, &[2]).unwrap();
    assert_eq!(a.id().index(), b.id().index(), "the same number in both graphs");
    assert_ne!(a.id(), b.id());
    assert_eq!((a.id().graph(), b.id().graph()), (g1.serial(), g2.serial()));
    let mut p1 = g1.compile(&[g1.relu(a).unwrap()]).unwrap();
    assert_eq!(p1.graph(), g1.serial());
    let v = Tensor::new(&[1f32, -1.], &[2]).unwrap();
    let mut out = p1.output(0).unwrap();
    let e = p1.run(&[(a.id(), &v), (b.id(), &v)], &mut [&mut out]).unwrap_err();
    assert_eq!(e.status(), Status::INVALID_ARGUMENT);
    let want = format!("feed 1: node {} belongs to graph #{}, not to graph #{}", b.id().index(), g2.serial(), g1.serial());
    assert!(e.message().contains(&want), "{e}");
    p1.run(&[(a.id(), &v)], &mut [&mut out]).unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![1.0, 0.0]);
    let msg = |r: chutney::Result<()>| r.unwrap_err().message().to_string();
    assert!(msg(p1.variable(b.id()).map(drop)).starts_with("Plan::variable: node"));
    assert!(msg(p1.set_variable(b.id(), &v)).starts_with("Plan::set_variable: node"));
    let path = tmp("other-graph.safetensors");
    assert!(msg(p1.save_variables(&[("b", b.id())], &path, None)).starts_with("save_variables: variable \"b\""));
    assert!(msg(p1.load_variables(&[("b", b.id())], &path)).starts_with("load_variables: variable \"b\""));
    assert!(msg(g1.node(b.id()).map(drop)).starts_with("Graph::node: node"));
    assert_eq!(g2.node(b.id()).unwrap().shape().unwrap(), vec![2]);
}

#[test]
fn plans_check_feeds_and_outputs() {
    let ctx = Context::new().unwrap();
    let g = ctx.graph().unwrap();
    let x = g.input("x", Dtype::F32, &[2, 2]).unwrap();
    let y = g.relu(x - 1.0).unwrap();
    let mut p = g.compile(&[y]).unwrap();
    let mut out = p.output(0).unwrap();
    let xv = Tensor::new(&[0.5f32, 1.5, 2.0, -3.0], &[2, 2]).unwrap();
    p.run(&[(x.id(), &xv)], &mut [&mut out]).unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![0.0, 0.5, 1.0, 0.0]);

    let wrong_shape = Tensor::new(&[1.0f32; 3], &[3]).unwrap();
    let e = p.run(&[(x.id(), &wrong_shape)], &mut [&mut out]).unwrap_err();
    assert_eq!(e.status(), Status::SHAPE, "{e}");
    let wrong_dtype = Tensor::new(&[1.0f64; 4], &[2, 2]).unwrap();
    assert_eq!(p.run(&[(x.id(), &wrong_dtype)], &mut [&mut out]).unwrap_err().status(), Status::DTYPE);
    assert!(p.run(&[], &mut [&mut out]).is_err(), "a missing feed");
    let mut bad_out = Tensor::zeros(Dtype::F32, &[5]).unwrap();
    assert!(p.run(&[(x.id(), &xv)], &mut [&mut bad_out]).is_err());
    let mut o2 = p.output(0).unwrap();
    assert_eq!(
        p.run(&[(x.id(), &xv)], &mut [&mut out, &mut o2]).unwrap_err().status(),
        Status::INVALID_ARGUMENT
    );
    assert!(p.output(7).is_err());
    // the failed runs left a working plan
    let r = p.run_outputs(&[(x.id(), &xv)]).unwrap();
    assert_eq!(r[0].to_vec::<f32>().unwrap(), vec![0.0, 0.5, 1.0, 0.0]);
    assert!(p.stats().unwrap().n_steps >= 1);
    assert!(p.backend_steps("cpu", None).unwrap() >= 1);
    assert!(!p.describe().unwrap().is_empty());
}

#[test]
fn tensors_convert_with_checks() {
    let t = Tensor::new(&[1i64, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
    assert_eq!(t.dtype().unwrap(), Dtype::I64);
    assert_eq!(t.shape().unwrap(), vec![2, 3]);
    assert_eq!(t.strides().unwrap(), vec![3, 1]);
    assert_eq!(t.to_vec::<f32>().unwrap_err().status(), Status::DTYPE);
    let mut short = [0i64; 5];
    assert!(t.read_into(&mut short).is_err());
    assert_eq!(Tensor::new(&[1u8; 5], &[2, 3]).unwrap_err().status(), Status::SHAPE);
    assert_eq!(Tensor::new::<f32>(&[], &[i64::MAX, 4]).unwrap_err().status(), Status::SHAPE);

    let tt = t.permute(&[1, 0]).unwrap();
    assert_eq!(tt.shape().unwrap(), vec![3, 2]);
    assert!(!tt.is_contiguous().unwrap());
    assert_eq!(tt.to_vec::<i64>().unwrap(), vec![1, 4, 2, 5, 3, 6]);
    let col = t.slice(1, 1, 3, 1).unwrap();
    assert_eq!(col.to_vec::<i64>().unwrap(), vec![2, 3, 5, 6]);
    assert_eq!(t.reshape(&[-1]).unwrap().shape().unwrap(), vec![6]);
    assert!(t.slice(5, 0, 1, 1).is_err());
    let c = tt.contiguous().unwrap();
    drop(tt);
    let mut c = c;
    c.write(&[9i64, 8, 7, 6, 5, 4]).unwrap();
    assert_eq!(c.to_vec::<i64>().unwrap(), vec![9, 8, 7, 6, 5, 4]);
    assert_eq!(c.write(&[1i64]).unwrap_err().status(), Status::INVALID_ARGUMENT);
    assert_eq!(t.to_vec::<i64>().unwrap(), vec![1, 2, 3, 4, 5, 6]);

    let b = Tensor::from_bools(&[true, false, true], &[3]).unwrap();
    assert_eq!(b.to_bools().unwrap(), vec![true, false, true]);
    assert_eq!(Tensor::scalar(2.5f64).unwrap().item::<f64>().unwrap(), 2.5);
}

#[test]
fn eager_graph_computes_at_once() {
    let ctx = Context::new().unwrap();
    let g = ctx.eager_graph().unwrap();
    let a = g.constant(&Tensor::new(&[1.0f64, -2.0, 3.0], &[3]).unwrap()).unwrap();
    let y = g.sum(a * a, &[], false).unwrap();
    assert_eq!(g.value(y).unwrap().item::<f64>().unwrap(), 14.0);
    assert_eq!(g.node_backend(y).unwrap(), "cpu");
    let w = g.variable("w", &Tensor::new(&[1.0f64, 1.0, 1.0], &[3]).unwrap()).unwrap();
    let l = g.sum(w * a, &[], false).unwrap();
    let dw = g.grad(l, &[w]).unwrap()[0];
    assert_eq!(g.value(dw).unwrap().to_vec::<f64>().unwrap(), vec![1.0, -2.0, 3.0]);
}

#[test]
fn checkpoints_round_trip_and_reject_garbage() {
    let path = tmp("ckpt.safetensors");
    let a = Tensor::new(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let b = Tensor::new(&[7i32], &[1]).unwrap();
    checkpoint::save(&path, &[("a", &a), ("b", &b)], Some(r#"{"epoch": "3"}"#)).unwrap();
    let c = Checkpoint::load(&path).unwrap();
    assert_eq!(c.names().unwrap(), vec!["a", "b"]);
    assert_eq!(c.info("a").unwrap(), (Dtype::F32, vec![2, 2]));
    assert_eq!(c.get("a").unwrap().to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(c.metadata_get("epoch").unwrap().as_deref(), Some("3"));
    assert_eq!(c.metadata_get("nope").unwrap(), None);
    assert_eq!(c.get("zzz").unwrap_err().status(), Status::INVALID_ARGUMENT);
    assert_eq!(
        checkpoint::save(&path, &[("a", &a), ("a", &b)], None).unwrap_err().status(),
        Status::INVALID_ARGUMENT
    );
    std::fs::write(&path, b"not a checkpoint at all").unwrap();
    let e = Checkpoint::load(&path).unwrap_err();
    assert_eq!(e.status(), Status::CORRUPT, "{e}");
    assert_eq!(Checkpoint::load(&tmp("missing")).unwrap_err().status(), Status::IO);
}

#[test]
fn train_an_mlp_on_synthetic_data_and_restore_it_from_a_checkpoint() {
    use chutney::nn::{Layer, Model, Optimizer, VAR_ALL, VAR_PARAMETER};
    let ctx = Context::new().unwrap();
    let g = ctx.graph().unwrap();
    let m = Model::new(&g, Dtype::F32, 42).unwrap();
    let x = g.input("x", Dtype::F32, &[32, 4]).unwrap();
    let labels = g.input("labels", Dtype::I32, &[32]).unwrap();
    let logits = m.sequential(x, &[Layer::Linear(16), Layer::Relu, Layer::Linear(2)]).unwrap();
    let loss = g.cross_entropy(logits, labels).unwrap();
    m.minimize(loss, &Optimizer::adam(0.05)).unwrap();
    let mut plan = g.compile(&[loss]).unwrap();

    // class = whether x0 + x1 > x2 + x3, from a fixed LCG
    let mut seed = 12345u64;
    let mut rnd = || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((seed >> 33) as f32 / (1u64 << 31) as f32) - 0.5
    };
    let xs: Vec<f32> = (0..32 * 4).map(|_| rnd()).collect();
    let ys: Vec<i32> = xs.chunks(4).map(|r| (r[0] + r[1] > r[2] + r[3]) as i32).collect();
    let xv = Tensor::new(&xs, &[32, 4]).unwrap();
    let yv = Tensor::new(&ys, &[32]).unwrap();
    let mut lv = plan.output(0).unwrap();
    let mut losses = Vec::new();
    for step in 1..=60 {
        m.set_step(step).unwrap();
        m.run(&mut plan, &[(x.id(), &xv), (labels.id(), &yv)], &mut [&mut lv]).unwrap();
        losses.push(lv.item::<f32>().unwrap());
    }
    assert!(losses[59] < losses[0] * 0.5, "loss {} -> {}", losses[0], losses[59]);

    let vars = m.variables(VAR_ALL).unwrap();
    let params = m.variables(VAR_PARAMETER).unwrap();
    assert_eq!(params.len(), 4, "{params:?}");
    assert!(vars.len() > params.len());
    let named: Vec<(&str, chutney::NodeId)> = vars.iter().map(|(n, id)| (n.as_str(), *id)).collect();
    let path = tmp("mlp.safetensors");
    plan.save_variables(&named, &path, None).unwrap();
    let saved = plan.variable(params[0].1).unwrap().to_vec::<f32>().unwrap();
    // one more step changes the weights; loading the checkpoint brings them back
    m.set_step(61).unwrap();
    m.run(&mut plan, &[(x.id(), &xv), (labels.id(), &yv)], &mut [&mut lv]).unwrap();
    assert_ne!(plan.variable(params[0].1).unwrap().to_vec::<f32>().unwrap(), saved);
    plan.load_variables(&named, &path).unwrap();
    assert_eq!(plan.variable(params[0].1).unwrap().to_vec::<f32>().unwrap(), saved);
    // a missing name fails and changes nothing
    let e = plan.load_variables(&[("nope", params[0].1)], &path).unwrap_err();
    assert_eq!(e.status(), Status::INVALID_ARGUMENT);
    assert!(e.message().contains("nope"), "{e}");
    // wrong shapes through the model fail cleanly
    assert_eq!(m.linear(x, 5, 3, true).unwrap_err().status(), Status::SHAPE);
}

#[test]
fn the_error_type_is_a_std_error() {
    fn f() -> Result<(), Box<dyn std::error::Error>> {
        Tensor::new(&[1.0f32], &[2])?;
        Ok(())
    }
    let e = f().unwrap_err();
    assert!(e.to_string().contains("CTN_ERR_SHAPE"));
    let e2: Error = Tensor::new(&[1.0f32], &[2]).unwrap_err();
    assert_eq!(e2.clone(), e2);
}

#[test]
fn the_readme_shows_the_readme_example() {
    let readme = include_str!("../../README.md");
    let example = include_str!("../examples/readme.rs");
    let body: String = example.lines().filter(|l| !l.starts_with("//!")).map(|l| format!("{l}\n")).collect();
    assert!(readme.contains(&format!("```rust\n{body}```")), "bindings/rust/README.md differs from examples/readme.rs");
}

#[test]
fn plans_and_models_of_other_graphs_are_errors_not_crashes() {
    use chutney::nn::{Layer, Model, Optimizer};
    let ctx = Context::new().unwrap();
    let g1 = ctx.graph().unwrap();
    let m1 = Model::new(&g1, Dtype::F32, 1).unwrap();
    let x1 = g1.input("x", Dtype::F32, &[2, 3]).unwrap();
    let y1 = m1.sequential(x1, &[Layer::Linear(2)]).unwrap();
    let l1 = g1.sum(y1, &[], false).unwrap();
    m1.minimize(l1, &Optimizer::sgd(0.1)).unwrap();
    let mut p1 = g1.compile(&[l1]).unwrap();

    let g2 = ctx.graph().unwrap();
    let m2 = Model::new(&g2, Dtype::F32, 1).unwrap();
    let x2 = g2.input("other", Dtype::F64, &[7]).unwrap();
    let mut p2 = g2.compile(&[x2]).unwrap();
    let xv = Tensor::new(&[0.5f32; 6], &[2, 3]).unwrap();
    // m2 feeds no step/lr of p1's graph: p1's "lr" input is missing
    let e = m2.run(&mut p1, &[(x1.id(), &xv)], &mut []).unwrap_err();
    assert_eq!(e.status(), Status::INVALID_ARGUMENT);
    assert!(e.message().contains("not from the model's graph"), "{e}");
    m1.run(&mut p1, &[(x1.id(), &xv)], &mut []).unwrap();
    // p2 fed with p1's input id: refused
    assert!(p2.run(&[(x1.id(), &xv)], &mut []).is_err());
    // a variable id of another plan
    let (_, w) = m1.variables(chutney::nn::VAR_PARAMETER).unwrap()[0].clone();
    assert!(p2.variable(w).is_err());
    assert!(p2.set_variable(w, &xv).is_err());
    // copying state into a plan of another graph: names absent on one side are skipped
    assert_eq!(chutney::nn::copy_state(&m1, &p1, &m2, &mut p2).unwrap(), 0);
    // a model on a lazy graph, its node used with another graph's call
    assert_eq!(g2.relu(y1).unwrap_err().status(), Status::INVALID_ARGUMENT);
    assert_eq!(m2.relu(x1).unwrap_err().status(), Status::INVALID_ARGUMENT);
}
