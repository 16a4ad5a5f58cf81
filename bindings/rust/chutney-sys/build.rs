//! Finds libchutney and compiles the layout probe.
//!
//! Library, first match wins:
//!  1. `CHUTNEY_LIB_DIR`: the folder holding libchutney.so (in a build tree: `<build>/core`;
//!     `. bindings/rust/env.sh <build>` sets it);
//!  2. the `pkg-config` program (or `$PKG_CONFIG`): `pkg-config --libs-only-L chutney`;
//!  3. otherwise the build fails and says what to set.
//!
//! The folder is recorded as an rpath of this crate's tests and exported to dependent build
//! scripts as `DEP_CHUTNEY_LIB_DIR` (the `chutney` crate adds the same rpath).
//!
//! Headers for the probe: `CHUTNEY_INCLUDE_DIR`, else pkg-config's `-I` folders, else the
//! repository's `abi/` next to this crate.
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn pkg_config(args: &[&str]) -> Result<String, String> {
    let prog = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let out = Command::new(&prog)
        .args(args)
        .arg("chutney")
        .output()
        .map_err(|e| format!("`{prog}` could not run: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`{prog} {} chutney` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn has_lib(dir: &Path) -> bool {
    dir.join("libchutney.so").exists() || dir.join("libchutney.dylib").exists()
}

/// The library folder (None: the linker's default path has it) and how it was found.
fn find_lib() -> (Option<PathBuf>, String) {
    if let Some(dir) = env::var_os("CHUTNEY_LIB_DIR") {
        let dir = PathBuf::from(dir);
        if !has_lib(&dir) {
            panic!(
                "chutney-sys: CHUTNEY_LIB_DIR={} holds no libchutney.so; in a build tree it is \
                 <build>/core (build it first: bash tools/setup.sh build)",
                dir.display()
            );
        }
        return (Some(dir), "CHUTNEY_LIB_DIR".to_string());
    }
    match pkg_config(&["--libs-only-L"]) {
        Ok(flags) => {
            let dirs: Vec<PathBuf> = flags
                .split_whitespace()
                .filter_map(|f| f.strip_prefix("-L"))
                .map(PathBuf::from)
                .collect();
            let dir = dirs.iter().find(|d| has_lib(d)).cloned();
            (dir, "pkg-config".to_string())
        }
        Err(why) => panic!(
            "chutney-sys: cannot find libchutney.\n  CHUTNEY_LIB_DIR is not set, and {why}.\n  \
             Set CHUTNEY_LIB_DIR to the folder holding libchutney.so (in a chutney build tree: \
             <build>/core; `. bindings/rust/env.sh <build>` sets it), or make \
             `pkg-config --libs chutney` work for an installed chutney \
             (PKG_CONFIG_PATH=<prefix>/<libdir>/pkgconfig)."
        ),
    }
}

fn include_dirs(manifest: &Path) -> Vec<PathBuf> {
    if let Some(dir) = env::var_os("CHUTNEY_INCLUDE_DIR") {
        return vec![PathBuf::from(dir)];
    }
    let repo_abi = manifest.join("../../../abi");
    if env::var_os("CHUTNEY_LIB_DIR").is_none() {
        if let Ok(flags) = pkg_config(&["--cflags-only-I"]) {
            let dirs: Vec<PathBuf> = flags
                .split_whitespace()
                .filter_map(|f| f.strip_prefix("-I"))
                .map(PathBuf::from)
                .filter(|d| d.join("chutney/chutney.h").exists())
                .collect();
            if !dirs.is_empty() {
                return dirs;
            }
        }
    }
    vec![repo_abi]
}

/// Compiles and runs probe.c; returns its output or a line "error <why>".
fn probe(manifest: &Path, out_dir: &Path, incs: &[PathBuf]) -> String {
    if env::var("TARGET").ok() != env::var("HOST").ok() {
        return "error cross build: the probe cannot run on the build machine\n".to_string();
    }
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let exe = out_dir.join("chutney-layout-probe");
    let mut cmd = Command::new(&cc);
    cmd.arg("-std=c11").arg("-o").arg(&exe).arg(manifest.join("probe.c"));
    for i in incs {
        cmd.arg("-I").arg(i);
    }
    match cmd.output() {
        Err(e) => return format!("error `{cc}` could not run: {e}\n"),
        Ok(o) if !o.status.success() => {
            return format!(
                "error `{cc}` failed on probe.c: {}\n",
                String::from_utf8_lossy(&o.stderr).replace('\n', " ")
            )
        }
        Ok(_) => {}
    }
    match Command::new(&exe).output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        Ok(o) => format!("error the probe exited with {}\n", o.status),
        Err(e) => format!("error the probe could not run: {e}\n"),
    }
}

fn main() {
    for v in ["CHUTNEY_LIB_DIR", "CHUTNEY_INCLUDE_DIR", "PKG_CONFIG", "PKG_CONFIG_PATH", "CC"] {
        println!("cargo:rerun-if-env-changed={v}");
    }
    println!("cargo:rerun-if-changed=probe.c");
    println!("cargo:rerun-if-changed=build.rs");

    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));

    let (lib_dir, how) = find_lib();
    if let Some(dir) = &lib_dir {
        println!("cargo:rustc-link-search=native={}", dir.display());
        // Tests and examples of this crate run without LD_LIBRARY_PATH.
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
        println!("cargo:lib_dir={}", dir.display());
    }
    println!("cargo:rustc-link-lib=dylib=chutney");
    println!("cargo:found_by={how}");

    let incs = include_dirs(&manifest);
    for i in &incs {
        // Every header (probe.c includes the covered ones, which include others).
        for entry in fs::read_dir(i.join("chutney")).into_iter().flatten().flatten() {
            if entry.path().extension().map_or(false, |e| e == "h") {
                println!("cargo:rerun-if-changed={}", entry.path().display());
            }
        }
    }
    let text = probe(&manifest, &out_dir, &incs);
    let header_dir = incs.iter().find(|d| d.join("chutney/chutney.h").exists());
    let mut meta = String::new();
    if let Some(d) = header_dir {
        meta = format!("include {}\n", d.join("chutney").display());
    }
    fs::write(out_dir.join("probe.txt"), meta + &text).expect("write probe.txt");
}
