//! The layer library beyond the MLP: a small CNN with batch norm trained by explicit grads and
//! Adam, an LSTM's shapes, clipping, schedules, initialisers.
use chutney::nn::{self, Init, LrSchedule, Model, VAR_BUFFER, VAR_PARAMETER};
use chutney::{Context, Dtype, Status, Tensor};

#[test]
fn a_small_cnn_trains_with_explicit_grads_and_adam() {
    let ctx = Context::new().unwrap();
    let g = ctx.graph().unwrap();
    let m = Model::new(&g, Dtype::F32, 7).unwrap();
    let x = g.input("x", Dtype::F32, &[8, 1, 6, 6]).unwrap();
    let labels = g.input("y", Dtype::I32, &[8]).unwrap();
    let h = m.conv2d(x, 1, 4, 3, 1, 1).unwrap();
    let h = m.batch_norm(h, 4, 0.0, 0.0).unwrap();
    let h = m.relu(h).unwrap();
    let h = m.max_pool2d(h, 2, 0).unwrap();
    assert_eq!(h.shape().unwrap(), vec![8, 4, 3, 3]);
    let h = m.flatten(h).unwrap();
    let logits = m.linear(h, 36, 2, true).unwrap();
    let loss = g.cross_entropy(logits, labels).unwrap();
    let params: Vec<_> = m.variables(VAR_PARAMETER).unwrap();
    assert_eq!(params.len(), 6, "{params:?}"); // conv w, b; bn weight, bias; linear w, b
    assert_eq!(m.variables(VAR_BUFFER).unwrap().len(), 2); // running mean, var
    assert!(params[0].0.starts_with("conv"), "{params:?}");
    // Model::minimize is the one-call path; here the explicit one: grad, clip, adam
    let p_nodes: Vec<_> = params.iter().map(|(_, id)| g.node(*id).unwrap()).collect();
    let other = ctx.graph().unwrap();
    let z = other.input("z", Dtype::F32, &[1]).unwrap();
    assert_eq!(g.node(z.id()).unwrap_err().status(), Status::INVALID_ARGUMENT);
    let same = m.variable(&params[0].0, nn::VAR_PARAMETER, &[4, 1, 3, 3], Init::Zeros, 1, 1, 0.0).unwrap();
    assert_eq!(same.id(), params[0].1, "an existing variable is returned");
    let grads = g.grad(loss, &p_nodes).unwrap();
    assert_eq!(m.adam(&grads[..1], 0.9, 0.999, 1e-8, 0.0, false).unwrap_err().status(), Status::INVALID_ARGUMENT);
    let (clipped, norm) = m.clip_grad_norm(&grads, 5.0).unwrap();
    m.adam(&clipped, 0.9, 0.999, 1e-8, 0.0, false).unwrap();
    let mut plan = g.compile(&[loss, norm]).unwrap();

    let xs: Vec<f32> = (0..8 * 36).map(|i| if (i / 36) % 2 == 0 { (i % 7) as f32 / 7.0 } else { -((i % 5) as f32) / 5.0 }).collect();
    let ys: Vec<i32> = (0..8).map(|i| i % 2).collect();
    let (xv, yv) = (Tensor::new(&xs, &[8, 1, 6, 6]).unwrap(), Tensor::new(&ys, &[8]).unwrap());
    m.set_lr(0.01).unwrap();
    let mut first = 0.0;
    let mut last = 0.0;
    let (mut lv, mut nv) = (plan.output(0).unwrap(), plan.output(1).unwrap());
    for step in 1..=30 {
        m.set_step(step).unwrap();
        m.run(&mut plan, &[(x.id(), &xv), (labels.id(), &yv)], &mut [&mut lv, &mut nv]).unwrap();
        last = lv.item::<f32>().unwrap();
        if step == 1 {
            first = last;
        }
        assert!(nv.item::<f32>().unwrap() >= 0.0);
    }
    assert!(last < first * 0.5, "loss {first} -> {last}");
}

#[test]
fn lstm_shapes_schedules_and_initialisers() {
    let ctx = Context::new().unwrap();
    let g = ctx.graph().unwrap();
    let m = Model::new(&g, Dtype::F64, 1).unwrap();
    let x = g.input("x", Dtype::F64, &[5, 2, 3]).unwrap();
    let (hs, hl) = m.lstm(x, 4).unwrap();
    assert_eq!(hs.shape().unwrap(), vec![5, 2, 4]);
    assert_eq!(hl.shape().unwrap(), vec![2, 4]);
    let ids = g.input("ids", Dtype::I64, &[2, 3]).unwrap();
    assert_eq!(m.embedding(ids, 10, 6).unwrap().shape().unwrap(), vec![2, 3, 6]);
    assert_eq!(m.lstm(ids, 4).unwrap_err().status(), Status::DTYPE);

    let s = LrSchedule { kind: chutney::sys::CTN_LR_COSINE, base_lr: 0.1, total_steps: 10, ..Default::default() };
    assert_eq!(nn::lr_at(&s, 1).unwrap(), 0.1);
    assert!(nn::lr_at(&s, 10).unwrap() < 0.01);
    assert_eq!(nn::lr_at(&s, 0).unwrap_err().status(), Status::INVALID_ARGUMENT);

    let mut t = Tensor::zeros(Dtype::F32, &[100]).unwrap();
    nn::init_fill(&mut t, Init::Uniform, 1, 1, 0.5, 3).unwrap();
    let v = t.to_vec::<f32>().unwrap();
    assert!(v.iter().all(|x| x.abs() <= 0.5) && v.iter().any(|x| *x != 0.0));
    let mut u = Tensor::zeros(Dtype::F32, &[100]).unwrap();
    nn::init_fill(&mut u, Init::Uniform, 1, 1, 0.5, 3).unwrap();
    assert_eq!(u.to_vec::<f32>().unwrap(), v, "deterministic");
    let mut i = Tensor::zeros(Dtype::I32, &[4]).unwrap();
    assert!(nn::init_fill(&mut i, Init::Ones, 1, 1, 0.0, 0).is_err());
}
