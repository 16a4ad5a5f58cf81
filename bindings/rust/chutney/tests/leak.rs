//! Many create/use/release cycles of every handle kind, with failing calls on the way: the
//! resident set size stays bounded. Alone in its test binary so that no other test changes the
//! RSS meanwhile. CHUTNEY_LEAK_CYCLES sets the count (default 3000). With
//! CHUTNEY_LEAK_CPU_ONLY=1 the contexts load only the CPU backend of $CHUTNEY_BUILD_DIR (for
//! valgrind, under which the OpenCL and Vulkan drivers take minutes to load).
use chutney::checkpoint;
use chutney::{Context, Dtype, Options, Tensor};

fn context() -> Context {
    if std::env::var_os("CHUTNEY_LEAK_CPU_ONLY").is_some() {
        let dir = std::env::var("CHUTNEY_BUILD_DIR").expect("CHUTNEY_LEAK_CPU_ONLY needs CHUTNEY_BUILD_DIR");
        let o = Options { no_autoload: true, plugin_path: Some(format!("{dir}/backends/cpu")), ..Default::default() };
        return Context::with_options(&o).unwrap();
    }
    Context::new().unwrap()
}

fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = s.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

fn cycle(ctx: &Context, i: usize, path: &std::path::Path) {
    let w0 = Tensor::new(&[0.5f32; 8 * 2], &[8, 2]).unwrap();
    let g = ctx.graph().unwrap();
    let x = g.input("x", Dtype::F32, &[4, 8]).unwrap();
    let w = g.variable("w", &w0).unwrap();
    let y = g.relu(g.matmul(x, w, false, false).unwrap()).unwrap();
    assert!(g.matmul(x, x, false, false).is_err()); // a failure: its message is copied
    let _ = x + w; // a failed operator: its error waits in the graph
    assert!(g.take_error().is_some());
    let loss = g.sum(y, &[], false).unwrap();
    let dw = g.grad(loss, &[w]).unwrap()[0];
    g.assign(w, w - dw * 0.01).unwrap();
    let mut p = g.compile(&[loss]).unwrap();
    let xid = x.id();
    drop(g); // a plan outlives its graph
    let xv = Tensor::new(&[i as f32 / 1000.0; 32], &[4, 8]).unwrap();
    let v = xv.slice(0, 0, 2, 1).unwrap();
    assert_eq!(v.numel().unwrap(), 16);
    let out = p.run_outputs(&[(xid, &xv)]).unwrap();
    assert!(out[0].item::<f32>().unwrap() >= 0.0);
    assert!(p.run(&[], &mut []).is_err());
    if i % 10 == 0 {
        checkpoint::save(path, &[("w", &w0)], None).unwrap();
        let c = checkpoint::Checkpoint::load(path).unwrap();
        assert_eq!(c.get("w").unwrap().numel().unwrap(), 16);
    }
}

#[test]
fn create_destroy_cycles_keep_rss_bounded() {
    let cycles: usize =
        std::env::var("CHUTNEY_LEAK_CYCLES").ok().and_then(|s| s.parse().ok()).unwrap_or(3000);
    let path = std::env::temp_dir().join(format!("chutney-rust-leak-{}.safetensors", std::process::id()));
    let warm: usize = std::env::var("CHUTNEY_LEAK_WARMUP").ok().and_then(|s| s.parse().ok()).unwrap_or(30);
    let ctx = context();
    for i in 0..warm.min(30) * 10 {
        cycle(&ctx, i, &path); // warm up: arenas, caches, the allocator's steady size
    }
    let before = rss_bytes();
    for i in 0..cycles {
        cycle(&ctx, i, &path);
    }
    let after = rss_bytes();
    // and whole contexts, after 30 to warm up: the plugins' vendor libraries, and malloc's
    // per-thread arenas, which the backends' new worker threads of each context add until
    // glibc's arena limit (RSS grows ~2 MiB over the first 50 contexts, ~1 MiB over the next
    // 100: fragmentation, not a leak that grows per context)
    let ctx_cycles: usize =
        std::env::var("CHUTNEY_LEAK_CONTEXTS").ok().and_then(|s| s.parse().ok()).unwrap_or(30);
    for _ in 0..warm {
        cycle(&context(), 1, &path);
    }
    let before_ctx = rss_bytes();
    for _ in 0..ctx_cycles {
        let c = context();
        cycle(&c, 1, &path);
    }
    let after_ctx = rss_bytes();
    let _ = std::fs::remove_file(&path);
    let growth = after.saturating_sub(before);
    let ctx_growth = after_ctx.saturating_sub(before_ctx);
    println!(
        "RSS {} KiB before, {} KiB after {cycles} cycles: growth {} KiB; {ctx_cycles} contexts: growth {} KiB",
        before >> 10,
        after >> 10,
        growth >> 10,
        ctx_growth >> 10
    );
    assert!(growth < 2 << 20, "RSS grew by {} KiB over {cycles} cycles (limit 2048 KiB)", growth >> 10);
    let per_ctx = ctx_growth / ctx_cycles.max(1) as u64;
    assert!(per_ctx < 100 << 10, "{ctx_cycles} contexts grew RSS by {} KiB", ctx_growth >> 10);
}
