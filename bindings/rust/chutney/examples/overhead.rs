//! Per-call overhead of the safe layer: the plan `y = x + 1` over four floats (a run is almost
//! all dispatch), run through `chutney_sys::ctn_plan_run` directly (what a C loop does: Rust
//! calls C with no glue) and through `Plan::run`, in alternating rounds; prints the median ns
//! per run of each and a JSON line.
//!
//!     cargo run --release --example overhead [-- ROUNDS RUNS]
use chutney::{sys, Context, Dtype, Tensor};
use std::time::Instant;

fn main() -> chutney::Result<()> {
    let mut args = std::env::args().skip(1);
    if matches!(args.next().as_deref(), Some("-h" | "--help")) {
        println!("usage: overhead [ROUNDS [RUNS]]  (default 7 rounds of 200000 runs)");
        return Ok(());
    }
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(7);
    let runs: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let ctx = Context::new()?;
    ctx.set_num_threads(1)?;
    let g = ctx.graph()?;
    let x = g.input("x", Dtype::F32, &[4])?;
    let mut plan = g.compile(&[x + 1.0])?;
    let xv = Tensor::new(&[1f32, 2., 3., 4.], &[4])?;
    let mut out = plan.output(0)?;
    let feeds = [(x.id(), &xv)];
    let (mut raw, mut safe) = (Vec::new(), Vec::new());
    let (node, feed, outp) = (x.id().index(), xv.as_raw() as *const sys::ctn_tensor, out.as_raw());
    plan.run(&feeds, &mut [&mut out])?; // warm up
    let pptr = plan.as_raw();
    for _ in 0..rounds {
        let t = Instant::now();
        for _ in 0..runs {
            plan.run(&feeds, &mut [&mut out])?;
        }
        safe.push(t.elapsed().as_nanos() as f64 / runs as f64);
        let t = Instant::now();
        for _ in 0..runs {
            // SAFETY: live plan and tensors of the right shapes, used by this thread only.
            let st = unsafe { sys::ctn_plan_run(pptr, 1, &node, &feed, 1, &outp) };
            assert_eq!(st, 0);
        }
        raw.push(t.elapsed().as_nanos() as f64 / runs as f64);
    }
    assert_eq!(out.to_vec::<f32>()?, vec![2.0, 3.0, 4.0, 5.0]);
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let (r, s) = (med(&mut raw), med(&mut safe));
    println!("raw ctn_plan_run: {r:.1} ns/run; Plan::run: {s:.1} ns/run; overhead {:.1} ns ({:.1} %)", s - r, 100.0 * (s - r) / r);
    println!(
        "{{\"rust_raw_ns_per_run\": {r:.1}, \"rust_plan_run_ns_per_run\": {s:.1}, \"rounds\": {rounds}, \"runs\": {runs}}}"
    );
    Ok(())
}
