//! The rpath of chutney-sys applies only to that crate's own binaries; this records the same
//! library folder (exported by chutney-sys as DEP_CHUTNEY_LIB_DIR) as an rpath of this crate's
//! tests, examples and doctests, so `cargo test` runs without LD_LIBRARY_PATH. Neither reaches a
//! crate that depends on `chutney`: its binaries get the rpath from RUSTFLAGS (`env.sh` sets
//! it) or its `.cargo/config.toml` (docs/RUST.md, "Your own crate").
fn main() {
    if let Ok(dir) = std::env::var("DEP_CHUTNEY_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
