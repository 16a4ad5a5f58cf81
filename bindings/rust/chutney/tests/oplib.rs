//! Ops written in Rust registered in process (Context::add_ops, ABI 1.2 ctn_context_add_oplib)
//! and the op registry (Context::ops, Context::op_support): values and gradients against
//! finite differences, training through a compiled plan, errors and panics as Err naming the
//! op, a duplicate name rejected with the context unchanged, concurrent use from threads.
use chutney::{Attrs, Context, Dtype, Error, OpDef, Options, Status, Tensor, TensorDesc};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A CPU context; with CHUTNEY_LEAK_CPU_ONLY=1 it loads only the CPU backend of
/// $CHUTNEY_BUILD_DIR (for valgrind, as tests/leak.rs).
fn ctx() -> Context {
    let mut o = Options { backends: Some("cpu".into()), ..Options::default() };
    if std::env::var_os("CHUTNEY_LEAK_CPU_ONLY").is_some() {
        let dir = std::env::var("CHUTNEY_BUILD_DIR").expect("CHUTNEY_LEAK_CPU_ONLY needs CHUTNEY_BUILD_DIR");
        o.no_autoload = true;
        o.plugin_path = Some(format!("{dir}/backends/cpu"));
    }
    Context::with_options(&o).unwrap()
}

fn beta(a: &Attrs) -> f64 {
    a.floats.first().copied().unwrap_or(1.0)
}

fn swish_ref(x: f64, b: f64) -> f64 {
    x / (1.0 + (-b * x).exp())
}

/// y = x * sigmoid(beta x), beta = f[0] (default 1): f32 and f64, a gradient rule from graph ops.
fn swish(name: &str) -> OpDef {
    OpDef::new(
        name,
        1,
        |ins, _| match ins[0].dtype {
            Dtype::F32 | Dtype::F64 => Ok(ins[0].clone()),
            d => Err(Error::new(Status::DTYPE, format!("x must be f32 or f64, not {d:?}"))),
        },
        |ins, out, a| {
            let b = beta(a);
            match out.desc().dtype {
                Dtype::F32 => {
                    let x = ins[0].as_slice::<f32>()?;
                    for (y, &v) in out.as_mut_slice::<f32>()?.iter_mut().zip(x) {
                        *y = swish_ref(v as f64, b) as f32;
                    }
                }
                _ => {
                    let x = ins[0].as_slice::<f64>()?;
                    for (y, &v) in out.as_mut_slice::<f64>()?.iter_mut().zip(x) {
                        *y = swish_ref(v, b);
                    }
                }
            }
            Ok(())
        },
    )
    .doc("x * sigmoid(beta x); f[0] = beta (default 1)")
    // d/dx x s(bx) = s + b x s (1 - s)
    .grad(|g, x, _y, dy, a| {
        let d = g.desc(x[0])?;
        let bt = g.scalar(d.dtype, beta(a))?;
        let bx = g.op("mul", &[x[0], bt], None)?;
        let s = g.op("sigmoid", &[bx], None)?;
        let one = g.scalar(d.dtype, 1.0)?;
        let oms = g.op("sub", &[one, s], None)?;
        let bxs = g.op("mul", &[bx, s], None)?;
        let ds = g.op("mul", &[bxs, oms], None)?;
        let t = g.op("add", &[s, ds], None)?;
        Ok(vec![Some(g.op("mul", &[dy, t], None)?)])
    })
}

#[test]
fn values_and_gradient_match_the_reference_and_finite_differences() {
    let mut c = ctx();
    c.add_ops("rs-test-ops", vec![swish("rs_swish")]).unwrap();
    let g = c.eager_graph().unwrap();
    let xs = [-3.0f64, -0.5, 0.0, 0.25, 2.0, 6.0];
    for b in [1.0, 1.7] {
        let attrs = Attrs { ints: vec![], floats: vec![b] };
        let x = g.constant(&Tensor::new(&xs, &[2, 3]).unwrap()).unwrap();
        let y = g.op("rs_swish", &[x], Some(&attrs)).unwrap();
        assert_eq!(y.shape().unwrap(), vec![2, 3]);
        let want: Vec<f64> = xs.iter().map(|&v| swish_ref(v, b)).collect();
        assert_eq!(g.value(y).unwrap().to_vec::<f64>().unwrap(), want);
        let l = g.sum(y, &[], false).unwrap();
        let dx = g.value(g.grad(l, &[x]).unwrap()[0]).unwrap().to_vec::<f64>().unwrap();
        for (d, &v) in dx.iter().zip(&xs) {
            let h = 1e-6;
            let fd = (swish_ref(v + h, b) - swish_ref(v - h, b)) / (2.0 * h);
            assert!((d - fd).abs() < 1e-6, "beta {b}: d/dx at {v}: {d} vs {fd}");
        }
    }
    // f32 through the same kernel
    let x = g.constant(&Tensor::new(&[2f32], &[1]).unwrap()).unwrap();
    let y = g.op("rs_swish", &[x], None).unwrap();
    assert_eq!(g.value(y).unwrap().to_vec::<f32>().unwrap(), vec![swish_ref(2.0, 1.0) as f32]);
}

#[test]
fn trains_through_a_compiled_plan_next_to_built_in_ops() {
    // fit y = swish(x w): x [8, 2], w [2, 1], target from w* = [0.5, -1]
    let mut c = ctx();
    c.add_ops("rs-test-ops", vec![swish("rs_swish")]).unwrap();
    let g = c.graph().unwrap();
    let x = g.input("x", Dtype::F32, &[8, 2]).unwrap();
    let t = g.input("t", Dtype::F32, &[8, 1]).unwrap();
    let w = g.variable("w", &Tensor::new(&[0.1f32, 0.1], &[2, 1]).unwrap()).unwrap();
    let y = g.op("rs_swish", &[g.matmul(x, w, false, false).unwrap()], None).unwrap();
    let d = y - t;
    let loss = g.mean(d * d, &[], false).unwrap();
    let dw = g.grad(loss, &[w]).unwrap()[0];
    g.assign(w, w - dw * 0.5).unwrap();
    let mut plan = g.compile(&[loss]).unwrap();
    assert!(plan.backend_steps("cpu", Some("rs_swish")).unwrap() >= 1);
    let xv: Vec<f32> = (0..16).map(|i| ((i * 7) % 11) as f32 / 5.0 - 1.0).collect();
    let tv: Vec<f32> = xv.chunks(2).map(|r| swish_ref((0.5 * r[0] - r[1]) as f64, 1.0) as f32).collect();
    let (xv, tv) = (Tensor::new(&xv, &[8, 2]).unwrap(), Tensor::new(&tv, &[8, 1]).unwrap());
    let mut losses = Vec::new();
    for _ in 0..300 {
        let out = plan.run_outputs(&[(x.id(), &xv), (t.id(), &tv)]).unwrap();
        losses.push(out[0].item::<f32>().unwrap());
    }
    let (first, last) = (losses[0], *losses.last().unwrap());
    assert!(last < first * 0.01, "loss {first} -> {last}");
    let wv = plan.variable(w.id()).unwrap().to_vec::<f32>().unwrap();
    assert!((wv[0] - 0.5).abs() < 0.1 && (wv[1] + 1.0).abs() < 0.1, "w = {wv:?}");
}

fn failing_ops(calls: Arc<AtomicUsize>) -> Vec<OpDef> {
    let same = |ins: &[TensorDesc], _: &Attrs| Ok(ins[0].clone());
    vec![
        OpDef::new(
            "rs_bad_infer",
            1,
            |_, _| Err(Error::new(Status::SHAPE, "shape refused")),
            |_, _, _| Ok(()),
        ),
        OpDef::new("rs_panic_infer", 1, |_, _| panic!("infer exploded"), |_, _, _| Ok(())),
        OpDef::new("rs_bad_kernel", 1, same, move |_, _, _| {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(Error::new(Status::INVALID_ARGUMENT, "kernel refused"))
        }),
        OpDef::new("rs_panic_kernel", 1, same, |_, _, _| panic!("kernel exploded")),
        OpDef::new("rs_wrong_dtype", 1, same, |ins, _, _| ins[0].as_slice::<i64>().map(|_| ())),
        OpDef::new("rs_panic_grad", 1, same, |ins, out, _| {
            out.as_mut_slice::<f32>()?.copy_from_slice(ins[0].as_slice::<f32>()?);
            Ok(())
        })
        .grad(|_, _, _, _, _| panic!("grad exploded")),
        OpDef::new("rs_no_grad", 1, same, |_, _, _| Ok(())),
        OpDef::new("rs_negative_dim", 1, |_, _| Ok(TensorDesc::new(Dtype::F32, &[2, -3])), |_, _, _| Ok(())),
    ]
}

#[test]
fn errors_and_panics_become_err_naming_the_op() {
    let calls = Arc::new(AtomicUsize::new(0));
    let mut c = ctx();
    c.add_ops("rs-failing", failing_ops(calls.clone())).unwrap();
    let g = c.eager_graph().unwrap();
    let x = g.constant(&Tensor::new(&[1f32, 2.0], &[2]).unwrap()).unwrap();
    let check = |e: Error, status: Status, parts: &[&str]| {
        assert_eq!(e.status(), status, "{e}");
        for p in parts {
            assert!(e.message().contains(p), "{e:?} lacks {p:?}");
        }
    };
    check(g.op("rs_bad_infer", &[x], None).unwrap_err(), Status::SHAPE, &["rs_bad_infer", "infer", "shape refused"]);
    check(g.op("rs_panic_infer", &[x], None).unwrap_err(), Status::INTERNAL, &["rs_panic_infer", "panicked", "infer exploded"]);
    check(g.op("rs_bad_kernel", &[x], None).unwrap_err(), Status::INVALID_ARGUMENT, &["rs_bad_kernel", "kernel refused"]);
    assert!(calls.load(Ordering::SeqCst) >= 1);
    check(g.op("rs_panic_kernel", &[x], None).unwrap_err(), Status::INTERNAL, &["rs_panic_kernel", "kernel exploded"]);
    check(g.op("rs_wrong_dtype", &[x], None).unwrap_err(), Status::DTYPE, &["rs_wrong_dtype", "not I64"]);
    check(g.op("rs_negative_dim", &[x], None).unwrap_err(), Status::SHAPE, &["rs_negative_dim", "negative"]);
    // wrong number of inputs: the host's check
    assert!(g.op("rs_no_grad", &[x, x], None).is_err());
    // gradients: a panicking rule, an op without one
    let y = g.op("rs_panic_grad", &[x], None).unwrap();
    assert_eq!(g.value(y).unwrap().to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
    let l = g.sum(y, &[], false).unwrap();
    check(g.grad(l, &[x]).unwrap_err(), Status::INTERNAL, &["rs_panic_grad", "grad exploded"]);
    let y = g.op("rs_no_grad", &[x], None).unwrap();
    let l = g.sum(y, &[], false).unwrap();
    assert!(g.grad(l, &[x]).is_err());

    // in a compiled plan: the kernel's error comes back from run, and the plan stays usable
    let lg = c.graph().unwrap();
    let xi = lg.input("x", Dtype::F32, &[2]).unwrap();
    let mut p = lg.compile(&[lg.op("rs_bad_kernel", &[xi], None).unwrap()]).unwrap();
    let xv = Tensor::new(&[1f32, 2.0], &[2]).unwrap();
    for _ in 0..2 {
        check(p.run_outputs(&[(xi.id(), &xv)]).unwrap_err(), Status::INVALID_ARGUMENT, &["rs_bad_kernel", "kernel refused"]);
    }
}

#[test]
fn bad_definitions_are_rejected_and_shared_names_are_namespaced() {
    let mut c = ctx();
    let n0 = c.ops().unwrap().len();
    let report0 = c.plugin_report().unwrap();
    // twice in one library
    let e = c.add_ops("rs-dup", vec![swish("rs_twice"), swish("rs_twice")]).unwrap_err();
    assert_eq!(e.status(), Status::PLUGIN, "{e}");
    assert_eq!(c.ops().unwrap().len(), n0);
    assert!(c.ops().unwrap().iter().all(|o| o.name != "rs_twice"));
    // Rust-side checks
    assert_eq!(c.add_ops("", vec![swish("a")]).unwrap_err().status(), Status::INVALID_ARGUMENT);
    assert_eq!(c.add_ops("x", vec![]).unwrap_err().status(), Status::INVALID_ARGUMENT);
    assert_eq!(c.add_ops("x", vec![swish("")]).unwrap_err().status(), Status::INVALID_ARGUMENT);
    assert_eq!(c.add_ops("x", vec![swish("a\0b")]).unwrap_err().status(), Status::INVALID_ARGUMENT);
    let zero = OpDef::new("rs_zero", 0, |_, _| Ok(TensorDesc::new(Dtype::F32, &[])), |_, _, _| Ok(()));
    assert_eq!(c.add_ops("x", vec![zero]).unwrap_err().status(), Status::INVALID_ARGUMENT);
    assert_eq!(c.ops().unwrap().len(), n0);

    // Op namespaces (docs/ABI.md): a name a built-in uses loads and shadows it for plain names;
    // ctn::softsign stays the built-in.
    c.add_ops("rs-shadow", vec![swish("softsign")]).unwrap();
    assert_eq!(c.ops().unwrap().len(), n0 + 1);
    assert!(c.ops().unwrap().iter().any(|o| o.name == "ctn::softsign" && o.origin == "builtin"));
    assert!(c.ops().unwrap().iter().any(|o| o.name == "softsign" && o.origin == "rs-shadow"));
    // a good library, then one sharing a name with it: both load, the first keeps the plain name
    c.add_ops("rs-first", vec![swish("rs_swish")]).unwrap();
    c.add_ops("rs-second", vec![swish("rs_other"), swish("rs_swish")]).unwrap();
    assert_eq!(c.ops().unwrap().len(), n0 + 4);
    assert!(c.ops().unwrap().iter().any(|o| o.name == "rs-second::rs_swish"));
    // the same library name twice is refused
    assert_eq!(c.add_ops("rs-first", vec![swish("rs_third")]).unwrap_err().status(), Status::PLUGIN);
    let g = c.eager_graph().unwrap();
    let x = g.constant(&Tensor::new(&[1f64], &[1]).unwrap()).unwrap();
    for name in ["rs_swish", "rs-first::rs_swish", "rs-second::rs_swish", "rs_other", "softsign", "rs-shadow::softsign"] {
        let y = g.op(name, &[x], None).unwrap();
        assert_eq!(g.value(y).unwrap().to_vec::<f64>().unwrap(), vec![swish_ref(1.0, 1.0)], "{name}");
    }
    let y = g.op("ctn::softsign", &[x], None).unwrap();
    assert_eq!(g.value(y).unwrap().to_vec::<f64>().unwrap(), vec![0.5]);
    drop(g);
    let report = c.plugin_report().unwrap();
    assert!(report.len() > report0.len() && report.contains("<in-process>") && report.contains("rs-first"), "{report}");
    assert!(report.contains("softsign resolves to rs-shadow::softsign (shadows the built-in op"), "{report}");
    assert!(report.contains("rs_swish resolves to rs-first::rs_swish of op library \"rs-first\""), "{report}");
}

#[test]
fn the_registry_lists_built_in_and_rust_ops_and_answers_support() {
    let mut c = ctx();
    c.add_ops("rs-reg", vec![swish("rs_swish"), OpDef::new("rs_plain", 2, |i, _| Ok(i[0].clone()), |_, _, _| Ok(())).doc("no grad")])
        .unwrap();
    let ops = c.ops().unwrap();
    let add = ops.iter().find(|o| o.name == "add").expect("add");
    assert_eq!((add.origin.as_str(), add.origin_path.as_str(), add.differentiable), ("builtin", "", true));
    let n = ops.len();
    let (a, b) = (&ops[n - 2], &ops[n - 1]);
    assert_eq!((a.name.as_str(), a.n_inputs, a.origin.as_str(), a.origin_path.as_str()), ("rs_swish", 1, "rs-reg", "<in-process>"));
    assert!(a.differentiable && a.doc.starts_with("x * sigmoid"));
    assert_eq!((b.name.as_str(), b.n_inputs, b.differentiable, b.doc.as_str()), ("rs_plain", 2, false, "no grad"));
    assert!(ops.iter().filter(|o| o.origin == "builtin").count() > 40);

    assert!(c.op_support("cpu", "add", Dtype::F32).unwrap().supported);
    let s = c.op_support("cpu", "rs_swish", Dtype::F64).unwrap();
    assert!(s.supported && s.reason.is_empty(), "{s:?}");
    let s = c.op_support("cpu", "rs_swish", Dtype::I32).unwrap();
    assert!(!s.supported && s.reason.contains("f32 or f64"), "{s:?}");
    assert_eq!(c.op_support("cpu", "no_such_op", Dtype::F32).unwrap_err().status(), Status::INVALID_ARGUMENT);
    assert!(c.op_support("no_such_backend", "add", Dtype::F32).is_err());
}

#[test]
fn ops_run_concurrently_from_threads() {
    let calls = Arc::new(AtomicUsize::new(0));
    let k = calls.clone();
    let mut c = ctx();
    let counted = OpDef::new("rs_double", 1, |i, _| Ok(i[0].clone()), move |ins, out, _| {
        k.fetch_add(1, Ordering::SeqCst);
        let x = ins[0].as_slice::<f64>()?;
        for (y, v) in out.as_mut_slice::<f64>()?.iter_mut().zip(x) {
            *y = 2.0 * v;
        }
        Ok(())
    })
    .grad(|g, x, _y, dy, _| {
        let two = g.scalar(g.desc(x[0])?.dtype, 2.0)?;
        Ok(vec![Some(g.op("mul", &[dy, two], None)?)])
    });
    c.add_ops("rs-threads", vec![counted, swish("rs_swish")]).unwrap();
    let c = &c;
    std::thread::scope(|s| {
        for t in 0..4 {
            s.spawn(move || {
                let g = c.graph().unwrap();
                let x = g.input("x", Dtype::F64, &[3]).unwrap();
                let y = g.op("rs_double", &[g.op("rs_swish", &[x], None).unwrap()], None).unwrap();
                let dx = g.grad(g.sum(y, &[], false).unwrap(), &[x]).unwrap()[0];
                let mut p = g.compile(&[y, dx]).unwrap();
                for i in 0..50 {
                    let v = [t as f64, i as f64 / 10.0, -1.0];
                    let out = p.run_outputs(&[(x.id(), &Tensor::new(&v, &[3]).unwrap())]).unwrap();
                    let want: Vec<f64> = v.iter().map(|&u| 2.0 * swish_ref(u, 1.0)).collect();
                    assert_eq!(out[0].to_vec::<f64>().unwrap(), want);
                    let h = 1e-6;
                    for (d, &u) in out[1].to_vec::<f64>().unwrap().iter().zip(&v) {
                        let fd = 2.0 * (swish_ref(u + h, 1.0) - swish_ref(u - h, 1.0)) / (2.0 * h);
                        assert!((d - fd).abs() < 1e-6, "{d} vs {fd}");
                    }
                }
            });
        }
    });
    assert_eq!(calls.load(Ordering::SeqCst), 4 * 50);
}
