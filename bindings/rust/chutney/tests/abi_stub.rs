//! A libchutney that reports ABI 2.0 gives `Error::AbiMismatch`, not a crash. The test builds a
//! stub library exporting every symbol chutney-sys declares (each returning an error; only
//! ctn_abi_version says 2.0), then reruns this test binary with the stub first on
//! LD_LIBRARY_PATH (the test's rpath is a RUNPATH, which LD_LIBRARY_PATH overrides).
use chutney::{Context, Error};
use std::process::Command;

const CHILD: &str = "CHUTNEY_ABI_STUB_CHILD";

#[test]
fn a_library_of_another_major_gives_abi_mismatch() {
    if std::env::var_os(CHILD).is_some() {
        match Context::new() {
            Err(Error::AbiMismatch { built, found }) => {
                assert_eq!(found, (2, 0));
                assert_eq!(built.0, chutney::sys::CTN_ABI_MAJOR);
                println!("child: {}", Error::AbiMismatch { built, found });
                println!("ABI-MISMATCH-OK");
            }
            other => panic!("expected AbiMismatch, got {other:?}"),
        }
        return;
    }
    let dir = std::env::temp_dir().join(format!("chutney-abi-stub-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let decls = include_str!("../../chutney-sys/src/ffi.rs");
    let mut c = String::from("/* stub libchutney reporting ABI 2.0 */\n");
    for (i, _) in decls.match_indices("pub fn ") {
        let rest = &decls[i + 7..];
        let name = &rest[..rest.find('(').unwrap()];
        c += &match name {
            "ctn_abi_version" => "unsigned ctn_abi_version(void) { return 2u << 16; }\n".to_string(),
            "ctn_status_name" | "ctn_last_error" | "ctn_version_string" | "ctn_dtype_name" => {
                format!("const char *{name}(void) {{ return \"stub\"; }}\n")
            }
            _ => format!("int {name}(void) {{ return 11; }}\n"),
        };
    }
    std::fs::write(dir.join("stub.c"), c).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let st = Command::new(&cc)
        .args(["-shared", "-fPIC", "-Wl,-soname,libchutney.so.0", "-o"])
        .arg(dir.join("libchutney.so.0"))
        .arg(dir.join("stub.c"))
        .status()
        .unwrap_or_else(|e| panic!("{cc}: {e}"));
    assert!(st.success(), "{cc} failed on the stub");
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["a_library_of_another_major_gives_abi_mismatch", "--exact", "--nocapture"])
        .env(CHILD, "1")
        .env("LD_LIBRARY_PATH", &dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success() && text.contains("ABI-MISMATCH-OK"), "child: {text}\n{}", String::from_utf8_lossy(&out.stderr));
}
