//! The README's example: fit a line y = x @ w by gradient descent.
//! `cargo run --example readme` prints the loss before and after training.
use chutney::{Context, Dtype, Tensor};

fn main() -> chutney::Result<()> {
    let ctx = Context::new()?;
    let g = ctx.graph()?;
    let x = g.input("x", Dtype::F32, &[4, 3])?; // 1. build: y = x @ w
    let t = g.input("t", Dtype::F32, &[4, 1])?;
    let w = g.variable("w", &Tensor::zeros(Dtype::F32, &[3, 1])?)?;
    let d = g.matmul(x, w, false, false)? - t;
    let loss = g.mean(d * d, &[], false)?; // loss = mean((x@w - t)^2)
    let dw = g.grad(loss, &[w])?[0]; // 2. differentiate
    g.assign(w, w - dw * 0.1)?; // w -= 0.1 dw after each run
    let mut plan = g.compile(&[loss])?; // 3. compile

    let xv = Tensor::new(&[1f32, 0., 0., 0., 1., 0., 0., 0., 1., 1., 1., 1.], &[4, 3])?;
    let tv = Tensor::new(&[1f32, 2., 3., 6.], &[4, 1])?;
    let mut lv = plan.output(0)?;
    let feeds = [(x.id(), &xv), (t.id(), &tv)];
    let mut first = None;
    for _ in 0..200 {
        // 4. run, many times
        plan.run(&feeds, &mut [&mut lv])?;
        first.get_or_insert(lv.item::<f32>()?);
    }
    println!("loss {} -> {}", first.unwrap_or_default(), lv.item::<f32>()?);
    println!("w = {:?}", plan.variable(w.id())?.to_vec::<f32>()?);
    Ok(())
}
