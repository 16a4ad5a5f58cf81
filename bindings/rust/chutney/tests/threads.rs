//! The thread rules: a Context shared by threads (Sync), graphs and plans moved between threads
//! (Send), concurrent plans giving the results of sequential ones bit for bit.
use chutney::{Context, Dtype, Graph, Tensor};

/// A small MLP-like computation whose result depends on `k`; returns the output bits.
fn run_once(g: &Graph<'_>, k: usize) -> Vec<u32> {
    let x = g.input("x", Dtype::F32, &[8, 16]).unwrap();
    let w0: Vec<f32> = (0..16 * 4).map(|i| ((i * 7 + k) % 13) as f32 / 13.0 - 0.5).collect();
    let w = g.constant(&Tensor::new(&w0, &[16, 4]).unwrap()).unwrap();
    let y = g.tanh(g.matmul(x, w, false, false).unwrap()).unwrap();
    let s = g.softmax(y, -1).unwrap();
    let mut p = g.compile(&[s]).unwrap();
    let xs: Vec<f32> = (0..8 * 16).map(|i| ((i * 5 + k) % 11) as f32 / 11.0).collect();
    let xv = Tensor::new(&xs, &[8, 16]).unwrap();
    let mut out = p.output(0).unwrap();
    for _ in 0..20 {
        p.run(&[(x.id(), &xv)], &mut [&mut out]).unwrap();
    }
    out.to_vec::<f32>().unwrap().into_iter().map(f32::to_bits).collect()
}

#[test]
fn concurrent_plans_on_one_context_match_sequential_runs() {
    let ctx = Context::new().unwrap();
    let want: Vec<Vec<u32>> = (0..4).map(|k| run_once(&ctx.graph().unwrap(), k)).collect();
    let got: Vec<Vec<u32>> = std::thread::scope(|s| {
        // every thread starts before the first join: the collect is what makes them concurrent
        #[allow(clippy::needless_collect)]
        let hs: Vec<_> = (0..4)
            .map(|k| {
                let ctx = &ctx;
                s.spawn(move || {
                    let g = ctx.graph().unwrap();
                    run_once(&g, k)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(got, want);
}

#[test]
fn graphs_and_plans_move_to_other_threads() {
    let ctx = Context::new().unwrap();
    let g = ctx.graph().unwrap();
    let x = g.input("x", Dtype::F64, &[3]).unwrap();
    let y = x * x;
    let (xid, mut plan) = (x.id(), g.compile(&[y]).unwrap());
    let t = Tensor::new(&[1.0f64, 2.0, 3.0], &[3]).unwrap();
    std::thread::scope(|s| {
        s.spawn(move || {
            let out = plan.run_outputs(&[(xid, &t)]).unwrap();
            assert_eq!(out[0].to_vec::<f64>().unwrap(), vec![1.0, 4.0, 9.0]);
        });
        // the graph itself moves too
        s.spawn(move || assert!(g.node_count().unwrap() >= 2));
    });
    // context options may change while other threads run
    ctx.set_num_threads(2).unwrap();
    assert!(ctx.set_num_threads(0).is_err());
}

#[test]
fn contexts_are_created_and_released_on_several_threads() {
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..3 {
                    let ctx = Context::new().unwrap();
                    let g = ctx.eager_graph().unwrap();
                    let a = g.scalar(Dtype::F32, 3.0).unwrap();
                    assert_eq!(g.value(a * a).unwrap().item::<f32>().unwrap(), 9.0);
                }
            });
        }
    });
}
