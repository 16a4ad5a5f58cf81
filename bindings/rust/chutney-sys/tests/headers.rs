//! A second, independent reading of the headers (not the generator's): the probe must list
//! every struct, field and constant of the covered headers, so a header the generator misreads
//! cannot slip past the layout test.
mod common;

use common::probe_lines;
use std::collections::{BTreeMap, BTreeSet};

/// struct name -> field names, from "typedef struct X { ... } X;" in the covered headers.
fn header_structs() -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for h in common::COVERED {
        let text = common::header(h);
        for (i, _) in text.match_indices("typedef struct ") {
            let rest = &text[i + 15..];
            let brace = match rest.find(['{', ';'].as_ref()) {
                Some(b) if rest.as_bytes()[b] == b'{' => b,
                _ => continue, // an opaque handle
            };
            let name = rest[..brace].trim().to_string();
            let body = &rest[brace + 1..rest.find('}').unwrap()];
            let mut fields = Vec::new();
            for decl in body.split(';').map(str::trim).filter(|d| !d.is_empty()) {
                if let Some(p) = decl.find("(*") {
                    let n = &decl[p + 2..];
                    fields.push(n[..n.find(')').unwrap()].to_string());
                    continue;
                }
                let decl = decl.split('[').next().unwrap();
                // "double beta1, beta2, eps": the first name follows the type.
                for part in decl.split(',') {
                    let word = part.trim().rsplit([' ', '*']).next().unwrap();
                    fields.push(word.to_string());
                }
            }
            out.insert(name, fields);
        }
    }
    out
}

#[test]
fn the_probe_covers_every_struct_and_field_of_the_headers() {
    let structs = header_structs();
    assert!(structs.len() >= 14, "found only {:?}", structs.keys());
    let probe: BTreeSet<String> = probe_lines().into_iter().collect();
    for (s, fields) in &structs {
        assert!(probe.iter().any(|l| l.starts_with(&format!("size {s} "))), "probe lacks struct {s}");
        for f in fields {
            let p = format!("offset {s}.{f} ");
            assert!(probe.iter().any(|l| l.starts_with(&p)), "probe lacks field {s}.{f}");
        }
        let n = probe.iter().filter(|l| l.starts_with(&format!("offset {s}."))).count();
        assert_eq!(n, fields.len(), "{s}: the probe lists {n} fields, the header {fields:?}");
    }
}

#[test]
fn the_probe_covers_every_constant_of_the_headers() {
    // Macros that are not constants of the application API.
    let skip = ["CTN_EXPORT", "CTN_API", "CTN_PLUGIN_EXPORT"];
    let probe: BTreeSet<String> = probe_lines().into_iter().collect();
    let mut seen = 0;
    for h in common::COVERED {
        let text = common::header(h);
        let mut names = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if let Some(rest) = line.strip_prefix("#define CTN_") {
                let name: String =
                    rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                let after = &rest[name.len()..];
                // function-like macros and empty defines are not constants
                if after.starts_with('(') || after.trim().is_empty() {
                    continue;
                }
                names.push(format!("CTN_{name}"));
            } else if line.starts_with("CTN_") && line.contains('=') {
                names.push(line.split([' ', '=']).next().unwrap().to_string());
            }
        }
        for n in names {
            if skip.contains(&n.as_str()) {
                continue;
            }
            seen += 1;
            let k = format!("const {n} ");
            let s = format!("string {n} ");
            assert!(
                probe.iter().any(|l| l.starts_with(&k) || l.starts_with(&s)),
                "{h}: the probe lacks constant {n}"
            );
        }
    }
    assert!(seen > 60, "found only {seen} constants in the headers");
}
