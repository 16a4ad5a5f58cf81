//! Run options (ABI 1.3): a cancel token from another thread, a timeout, numerics checks.
use chutney::{CancelToken, Context, Dtype, NodeId, RunOptions, Status, Tensor};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn a_cancel_token_stops_a_long_run_and_keeps_the_variables() {
    let ctx = Context::new().unwrap();
    let g = ctx.graph().unwrap();
    let x = g.input("x", Dtype::F32, &[128, 128]).unwrap();
    let v = g.variable("v", &Tensor::new(&[0.01f32; 128 * 128], &[128, 128]).unwrap()).unwrap();
    let mut h = x;
    for _ in 0..300 {
        h = g.tanh(g.matmul(h, v, false, false).unwrap()).unwrap();
    }
    g.assign(v, g.add(v, h).unwrap()).unwrap();
    let (xid, vid) = (NodeId::from(x), NodeId::from(v));
    let mut plan = g.compile(&[h]).unwrap();
    let xv = Tensor::new(&[0.5f32; 128 * 128], &[128, 128]).unwrap();
    let token = Arc::new(CancelToken::new().unwrap());
    let opts = RunOptions { cancel: Some(&token), ..Default::default() };
    let t0 = Instant::now();
    plan.run_with_options(&opts, &[(xid, &xv)], &mut []).unwrap();
    let full = t0.elapsed();
    let before = plan.variable(vid).unwrap().to_vec::<f32>().unwrap();
    let other = Arc::clone(&token);
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(full / 4);
        other.cancel();
    });
    let e = plan.run_with_options(&opts, &[(xid, &xv)], &mut []).unwrap_err();
    canceller.join().unwrap();
    assert_eq!(e.status(), Status::CANCELLED, "{}", e.message());
    assert!(token.is_cancelled());
    assert_eq!(plan.variable(vid).unwrap().to_vec::<f32>().unwrap(), before, "a cancelled run changed v");
    token.reset();
    let short = RunOptions { timeout: Some(Duration::from_micros(1)), ..Default::default() };
    assert_eq!(plan.run_with_options(&short, &[(xid, &xv)], &mut []).unwrap_err().status(), Status::CANCELLED);
    plan.run_with_options(&opts, &[(xid, &xv)], &mut []).unwrap();
    assert_ne!(plan.variable(vid).unwrap().to_vec::<f32>().unwrap(), before, "a completed run updates v");
}

#[test]
fn check_numerics_names_the_op_that_made_a_nan() {
    let ctx = Context::new().unwrap();
    let g = ctx.graph().unwrap();
    let x = g.input("x", Dtype::F32, &[4]).unwrap();
    let y = g.exp(g.log(x).unwrap()).unwrap();
    let mut plan = g.compile(&[y]).unwrap();
    let xv = Tensor::new(&[1.0f32, -1.0, 2.0, 3.0], &[4]).unwrap();
    plan.run(&[(x.into(), &xv)], &mut []).unwrap();
    let opts = RunOptions { check_numerics: true, ..Default::default() };
    let e = plan.run_with_options(&opts, &[(x.into(), &xv)], &mut []).unwrap_err();
    assert_eq!(e.status(), Status::NUMERICS);
    assert!(e.message().contains("(log, node 1,"), "{}", e.message());
}
