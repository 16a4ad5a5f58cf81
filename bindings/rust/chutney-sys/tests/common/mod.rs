//! Shared by the header tests: the probe output and the headers it was compiled against.
#![allow(dead_code)]

use std::fs;
use std::path::PathBuf;

/// The output of the C layout probe that build.rs compiled and ran.
pub const PROBE: &str = include_str!(concat!(env!("OUT_DIR"), "/probe.txt"));

/// The headers chutney-sys declares (the others are checked by completeness only).
pub const COVERED: &[&str] =
    &[
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
];

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
