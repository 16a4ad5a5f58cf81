//! The Rust MLP example and `chutney train` (the C API through the CLI) train the same MLP with
//! the same seed: every update's loss and learning rate print the same, bit for bit, and so do
//! the epoch summaries. Needs Fashion-MNIST (dataset-fashion-mnist) and the CLI of the build
//! tree, so it is #[ignore]d: tools/test.d/70-rust.sh runs it with --ignored when both exist.
#[allow(dead_code)]
#[path = "../examples/mlp.rs"]
mod mlp;

use std::process::Command;

#[test]
fn fmt_g_prints_like_printf() {
    assert_eq!(mlp::fmt_g(0.05, 17), "0.050000000000000003");
    assert_eq!(mlp::fmt_g(0.00030779148512155856, 17), "0.00030779148512155856");
    assert_eq!(mlp::fmt_g(3.3513546f32 as f64, 9), "3.3513546");
    assert_eq!(mlp::fmt_g("0.861519158".parse::<f32>().unwrap() as f64, 9), "0.861519158");
    assert_eq!(mlp::fmt_g(1.5e-7, 9), "1.5e-07");
    assert_eq!(mlp::fmt_g(123456789012.0, 9), "1.23456789e+11");
    assert_eq!(mlp::fmt_g(2.0, 9), "2");
}

#[test]
#[ignore]
fn losses_match_the_cli_bit_for_bit() {
    let cli = std::env::var("CHUTNEY_CLI").unwrap_or_else(|_| {
        let dir = std::env::var("CHUTNEY_BUILD_DIR").expect("set CHUTNEY_BUILD_DIR (env.sh) or CHUTNEY_CLI");
        format!("{dir}/tools/chutney/chutney")
    });
    let out = Command::new(&cli)
        .args(["train", "--model", "mlp", "--epochs", "2", "--limit", "1280", "--seed", "3", "--print-steps", "--quiet"])
        .output()
        .unwrap_or_else(|e| panic!("{cli}: {e}"));
    assert!(out.status.success(), "{cli}: {}", String::from_utf8_lossy(&out.stderr));
    let want = String::from_utf8(out.stdout).unwrap();
    let c = mlp::Config { epochs: 2, seed: 3, limit: 1280, print_steps: true, ..Default::default() };
    let mut got = Vec::new();
    let losses = mlp::train(&c, &mut got).unwrap();
    let got = String::from_utf8(got).unwrap();
    assert_eq!(losses.len(), 20);
    let pick = |s: &str, p: &str| s.lines().filter(|l| l.starts_with(p)).map(str::to_string).collect::<Vec<_>>();
    let (ws, gs) = (pick(&want, "step "), pick(&got, "step "));
    assert_eq!(ws.len(), 20, "the CLI printed:\n{want}");
    assert_eq!(gs, ws);
    // "epoch 1/2: train loss 1.7514, test accuracy 0.6541" (the CLI adds timings after it)
    let (we, ge) = (pick(&want, "epoch "), pick(&got, "epoch "));
    assert_eq!((we.len(), ge.len()), (2, 2), "{we:?} {ge:?}");
    for (w, g) in we.iter().zip(&ge) {
        assert!(w.starts_with(&format!("{g},")), "CLI: {w}\nRust: {g}");
    }
}
