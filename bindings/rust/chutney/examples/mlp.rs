//! MLP training on Fashion-MNIST through the Rust binding: the model, optimizer, schedule, data
//! order and seed of `chutney train --model mlp`, so that `--print-steps` prints the same
//! per-update losses as the CLI, bit for bit (tests/mlp_cli.rs checks it).
//!
//!     cargo run --release --example mlp -- --epochs 1 --limit 1280 --print-steps
use chutney::data::{Dataset, Loader, LoaderOptions};
use chutney::nn::{self, Layer, LrSchedule, Model, Optimizer};
use chutney::{Context, Dtype, Graph, Node, Plan, Tensor};
use std::io::Write;
use std::path::PathBuf;

/// The CLI's options for the MLP (and their defaults).
#[derive(Debug, Clone)]
pub struct Config {
    pub epochs: i64,
    pub batch: i64,
    pub lr: f64,
    pub momentum: f64,
    pub seed: u64,
    /// > 0: train on this many (shuffled) images per epoch.
    pub limit: i64,
    pub eval_batch: i64,
    pub data_dir: Option<PathBuf>,
    pub print_steps: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            epochs: 2,
            batch: 128,
            lr: 0.05,
            momentum: 0.9,
            seed: 1,
            limit: 0,
            eval_batch: 0,
            data_dir: None,
            print_steps: false,
        }
    }
}

// The CLI's pixel normalisation (Fashion-MNIST training-set statistics).
const PIXEL_MEAN: f64 = 0.2860;
const PIXEL_STD: f64 = 0.3530;

/// printf's "%.{prec}g": what the CLI prints, so that lines compare as strings.
pub fn fmt_g(v: f64, prec: usize) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let e = format!("{:.*e}", prec - 1, v);
    let (mant, exp) = e.split_once('e').unwrap();
    let exp: i32 = exp.parse().unwrap();
    let trim = |s: String| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if exp < -4 || exp >= prec as i32 {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mant.to_string()), exp.abs())
    } else {
        trim(format!("{:.*}", (prec as i32 - 1 - exp) as usize, v))
    }
}

/// The CLI's 784-512-256-10 network in its own graph; training adds the loss and SGD.
fn build<'g>(g: &'g Graph<'_>, batch: i64, c: &Config, training: bool) -> chutney::Result<(Model<'g>, Node<'g>, Option<Node<'g>>, Node<'g>)> {
    let m = Model::new(g, Dtype::F32, c.seed)?;
    m.set_training(training)?;
    let x = g.input("x", Dtype::F32, &[batch, 784])?;
    let logits = m.sequential(
        x,
        &[Layer::Linear(512), Layer::Relu, Layer::Linear(256), Layer::Relu, Layer::Linear(10)],
    )?;
    if !training {
        return Ok((m, x, None, logits));
    }
    let labels = g.input("labels", Dtype::I32, &[batch])?;
    let loss = g.cross_entropy(logits, labels)?;
    let mut opt = Optimizer::sgd(c.lr);
    opt.momentum = c.momentum;
    m.minimize(loss, &opt)?;
    Ok((m, x, Some(labels), loss))
}

/// Trains; returns every update's loss and writes the CLI's step and epoch lines to `out`.
pub fn train(c: &Config, out: &mut dyn Write) -> Result<Vec<f32>, Box<dyn std::error::Error>> {
    let eval_batch = if c.eval_batch == 0 { c.batch } else { c.eval_batch };
    let train_set = Dataset::fashion_mnist(c.data_dir.as_deref(), "train")?;
    let test_set = Dataset::fashion_mnist(c.data_dir.as_deref(), "test")?;
    let opts = LoaderOptions {
        batch_size: c.batch as i32,
        shuffle: true,
        drop_last: true,
        flat: true,
        seed: c.seed,
        mean: PIXEL_MEAN,
        std: PIXEL_STD,
        num_workers: 1,
        ..Default::default()
    };
    let mut train_loader = Loader::new(&train_set, &opts)?;
    let eval_opts = LoaderOptions { batch_size: eval_batch as i32, shuffle: false, drop_last: false, ..opts };
    let mut test_loader = Loader::new(&test_set, &eval_opts)?;
    let mut batches = train_loader.num_batches()?;
    if c.limit > 0 && c.limit / c.batch < batches {
        batches = c.limit / c.batch;
    }

    let ctx = Context::new()?;
    let tg = ctx.graph()?;
    let (tm, tx, tlabels, tloss) = build(&tg, c.batch, c, true)?;
    let eg = ctx.graph()?;
    let (em, ex, _, elogits) = build(&eg, eval_batch, c, false)?;
    let mut train_plan = tg.compile(&[tloss])?;
    let mut eval_plan = eg.compile(&[elogits])?;

    let (mut x, mut y) = train_loader.batch()?;
    let mut loss_t = train_plan.output(0)?;
    let schedule = LrSchedule {
        kind: chutney::sys::CTN_LR_COSINE,
        base_lr: c.lr,
        total_steps: (c.epochs * batches).max(1),
        ..Default::default()
    };
    let mut losses = Vec::new();
    let mut step = 0i64;
    for epoch in 1..=c.epochs {
        train_loader.reset(epoch - 1)?;
        let mut sum = 0.0f64;
        for _ in 0..batches {
            let n = train_loader.next(&mut x, &mut y)?;
            if n as i64 != c.batch {
                return Err(format!("the loader returned a short batch ({n})").into());
            }
            step += 1;
            let lr = nn::lr_at(&schedule, step)?;
            tm.set_step(step)?;
            tm.set_lr(lr)?;
            tm.run(&mut train_plan, &[(tx.id(), &x), (tlabels.unwrap().id(), &y)], &mut [&mut loss_t])?;
            let loss = loss_t.item::<f32>()?;
            if c.print_steps {
                writeln!(out, "step {step} lr {} loss {}", fmt_g(lr, 17), fmt_g(loss as f64, 9))?;
            }
            losses.push(loss);
            sum += loss as f64;
        }
        nn::copy_state(&tm, &train_plan, &em, &mut eval_plan)?;
        let acc = evaluate(&mut eval_plan, ex.id(), &mut test_loader)?;
        writeln!(out, "epoch {epoch}/{}: train loss {:.4}, test accuracy {:.4}", c.epochs, sum / batches as f64, acc)?;
    }
    Ok(losses)
}

/// Accuracy of the inference plan over every test sample (padded rows of the last batch
/// ignored).
fn evaluate(plan: &mut Plan<'_>, x: chutney::NodeId, loader: &mut Loader) -> chutney::Result<f64> {
    let (mut images, mut labels) = loader.batch()?;
    let mut logits: Tensor = plan.output(0)?;
    let shape = logits.shape()?;
    let classes = shape[1] as usize;
    loader.reset(0)?;
    let (mut correct, mut total) = (0usize, 0usize);
    loop {
        let n = loader.next(&mut images, &mut labels)?;
        if n == 0 {
            break;
        }
        plan.run(&[(x, &images)], &mut [&mut logits])?;
        let out = logits.to_vec::<f32>()?;
        let lab = labels.to_vec::<i32>()?;
        for (i, &label) in lab.iter().enumerate().take(n) {
            let row = &out[i * classes..(i + 1) * classes];
            let mut best = 0;
            for (k, &v) in row.iter().enumerate() {
                if v > row[best] {
                    best = k;
                }
            }
            correct += (best as i32 == label) as usize;
            total += 1;
        }
    }
    Ok(correct as f64 / total.max(1) as f64)
}

#[allow(dead_code)]
fn main() {
    let mut c = Config::default();
    let mut args = std::env::args().skip(1);
    let usage = "usage: mlp [--epochs N] [--batch-size N] [--lr X] [--momentum X] [--seed N] \
                 [--limit N] [--eval-batch-size N] [--data-dir DIR] [--print-steps]\n\
                 Trains the 784-512-256-10 MLP of `chutney train --model mlp` on Fashion-MNIST \
                 (Debian's dataset-fashion-mnist) and prints what the CLI prints.";
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| panic!("{a} needs a value\n{usage}"));
        match a.as_str() {
            "--epochs" => c.epochs = val().parse().expect("--epochs"),
            "--batch-size" => c.batch = val().parse().expect("--batch-size"),
            "--lr" => c.lr = val().parse().expect("--lr"),
            "--momentum" => c.momentum = val().parse().expect("--momentum"),
            "--seed" => c.seed = val().parse().expect("--seed"),
            "--limit" => c.limit = val().parse().expect("--limit"),
            "--eval-batch-size" => c.eval_batch = val().parse().expect("--eval-batch-size"),
            "--data-dir" => c.data_dir = Some(PathBuf::from(val())),
            "--print-steps" => c.print_steps = true,
            "-h" | "--help" => {
                println!("{usage}");
                return;
            }
            _ => {
                eprintln!("unknown argument {a}\n{usage}");
                std::process::exit(2);
            }
        }
    }
    if let Err(e) = train(&c, &mut std::io::stdout()) {
        eprintln!("mlp: {e}");
        std::process::exit(1);
    }
}
