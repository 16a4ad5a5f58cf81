//! Shared by the header tests: the probe output and the headers it was compiled against.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;

/// The output of the C layout probe that build.rs compiled and ran.
pub const PROBE: &str = include_str!(concat!(env!("OUT_DIR"), "/probe.txt"));

/// The headers chutney-sys declares (the others are checked by completeness only).
pub const COVERED: &[&str] = &[
    "types.h",
    "version.h",
    "chutney.h",
    "nn.h",
    "data.h",
    "checkpoint.h",
    "onnx.h",
    "plugin.h",
    "oplib.h",
    "collective.h",
    "opencl.h",
    "vulkan.h",
    "cuda.h",
];

/// offset_of! for Rust 1.63 (std's macro is 1.77+): the address of a field of an
/// uninitialised value, no reference to uninitialised memory taken.
#[macro_export]
macro_rules! offset {
    ($t:ty, $f:ident) => {{
        let u = std::mem::MaybeUninit::<$t>::uninit();
        let base = u.as_ptr();
        // SAFETY: addr_of! computes the address without reading or referencing the field.
        let field = unsafe { std::ptr::addr_of!((*base).$f) };
        field as usize - base as usize
    }};
}

/// Lines "size T n", "align T n", "offset T.f n" as the probe prints them; `fn_ = fn` names a
/// field whose C name is a Rust keyword.
#[macro_export]
macro_rules! layout {
    ($out:ident; $($t:ident { $($f:ident $(= $cname:ident)?),* })*) => {$(
        $out.push(format!("size {} {}", stringify!($t), std::mem::size_of::<$t>()));
        $out.push(format!("align {} {}", stringify!($t), std::mem::align_of::<$t>()));
        $(
            #[allow(unused_variables)]
            let cname = stringify!($f);
            $(let cname = stringify!($cname);)?
            $out.push(format!("offset {}.{} {}", stringify!($t), cname, $crate::offset!($t, $f)));
        )*
    )*};
}

/// Lines "const C n".
#[macro_export]
macro_rules! consts {
    ($out:ident; $($c:ident)*) => {$( $out.push(format!("const {} {}", stringify!($c), $c as i64)); )*};
}

/// Lines "string C text" of the NUL-terminated string constants.
#[macro_export]
macro_rules! strings {
    ($out:ident; $($c:ident)*) => {$(
        assert_eq!($c.last(), Some(&0), "{} is not NUL-terminated", stringify!($c));
        let text = std::str::from_utf8(&$c[..$c.len() - 1]).unwrap();
        $out.push(format!("string {} {}", stringify!($c), text));
    )*};
}

/// The probe's lines, less the header folder; a probe that did not run fails here.
pub fn probe_lines() -> Vec<String> {
    let lines: Vec<String> =
        PROBE.lines().filter(|l| !l.starts_with("include ")).map(str::to_string).collect();
    if let Some(err) = lines.iter().find(|l| l.starts_with("error ")) {
        panic!("the C layout probe did not run (build.rs): {err}");
    }
    lines
}

/// The Rust side's lines are exactly the probe's.
pub fn assert_same_as_probe(rust: Vec<String>) {
    let c: BTreeSet<String> = probe_lines().into_iter().collect();
    let r: BTreeSet<String> = rust.into_iter().collect();
    assert!(c.len() > 200, "the probe printed only {} lines", c.len());
    let only_c: Vec<_> = c.difference(&r).collect();
    let only_r: Vec<_> = r.difference(&c).collect();
    assert!(
        only_c.is_empty() && only_r.is_empty(),
        "C probe and Rust differ.\n  C says: {only_c:#?}\n  Rust says: {only_r:#?}"
    );
}

/// The folder abi/chutney the probe was compiled against.
pub fn header_dir() -> PathBuf {
    for line in PROBE.lines() {
        if let Some(rest) = line.strip_prefix("include ") {
            return PathBuf::from(rest);
        }
    }
    panic!("the probe output names no header folder:\n{PROBE}");
}

/// The text of header `name`, comments removed.
pub fn header(name: &str) -> String {
    let path = header_dir().join(name);
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    strip_comments(&text)
}

fn strip_comments(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        match rest[i..].find("*/") {
            Some(j) => rest = &rest[i + j + 2..],
            None => {
                rest = "";
                break;
            }
        }
    }
    out.push_str(rest);
    out.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}
