//! Every CTN_API function of abi/chutney/*.h is declared in chutney-sys or listed in LEFT_OUT
//! with a reason; nothing is declared that the headers lack.
mod common;

use std::collections::BTreeSet;
use std::fs;

/// Names of the CTN_API functions of one header (the identifier before the first '(').
fn api_functions(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (i, _) in text.match_indices("CTN_API ") {
        if text[..i].ends_with("#define ") {
            continue; // types.h defining the macro itself
        }
        let decl = &text[i..];
        let paren = decl.find('(').expect("CTN_API declaration without '('");
        let head = decl[..paren].trim_end();
        let name = head
            .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .next()
            .unwrap();
        names.push(name.to_string());
    }
    names
}

#[test]
fn every_api_function_is_declared_or_left_out_with_a_reason() {
    let dir = common::header_dir();
    let mut in_headers = BTreeSet::new();
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().map_or(false, |e| e == "h") {
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            for f in api_functions(&common::header(&name)) {
                in_headers.insert(f);
            }
        }
    }
    assert!(in_headers.len() > 100, "too few CTN_API functions found in {}", dir.display());

    let src = include_str!("../src/ffi.rs");
    let declared: BTreeSet<String> = src
        .match_indices("pub fn ")
        .map(|(i, _)| {
            let rest = &src[i + 7..];
            rest[..rest.find('(').unwrap()].to_string()
        })
        .collect();
    let left_out: BTreeSet<String> =
        chutney_sys::LEFT_OUT.iter().map(|(n, _)| n.to_string()).collect();
    for (name, why) in chutney_sys::LEFT_OUT {
        assert!(why.len() > 10, "{name} is left out without a reason");
    }

    let missing: Vec<_> =
        in_headers.iter().filter(|n| !declared.contains(*n) && !left_out.contains(*n)).collect();
    assert!(missing.is_empty(), "CTN_API functions not declared in chutney-sys: {missing:?}");
    let unknown: Vec<_> = declared.union(&left_out).filter(|n| !in_headers.contains(*n)).collect();
    assert!(unknown.is_empty(), "declared or left out but not in the headers: {unknown:?}");
    let both: Vec<_> = declared.intersection(&left_out).collect();
    assert!(both.is_empty(), "both declared and left out: {both:?}");

    let symbols = include_str!("symbols.rs");
    for name in &declared {
        let entry = format!("(\"{name}\", {name} as *const () as usize)");
        assert!(symbols.contains(&entry), "tests/symbols.rs does not link {name}");
    }
}

#[test]
fn library_abi_major_matches() {
    // SAFETY: ctn_abi_version takes nothing and never fails.
    let v = unsafe { chutney_sys::ctn_abi_version() };
    assert_eq!(v >> 16, chutney_sys::CTN_ABI_MAJOR, "library ABI {}.{}", v >> 16, v & 0xffff);
    assert!(v & 0xffff >= chutney_sys::CTN_ABI_MINOR, "library ABI minor {} is older", v & 0xffff);
}

#[test]
fn sized_structs_carry_their_size_and_nothing_else() {
    let oi = chutney_sys::ctn_op_info::sized();
    assert_eq!(oi.struct_size as usize, std::mem::size_of::<chutney_sys::ctn_op_info>());
    assert!(oi.name.is_null() && oi.n_inputs == 0 && oi.flags == 0);
    let h = chutney_sys::ctn_host_api::sized();
    assert_eq!(h.struct_size as usize, std::mem::size_of::<chutney_sys::ctn_host_api>());
    assert!(h.set_error.is_none() && h.backend_proc.is_none());
}
