//! The engine is layered inside: a module imports only modules of the layers below its
//! own, so there is no import circle among them. The layers are the table in
//! ARCHITECTURE.md ("Engine layers"); this test reads every source file of the engine
//! and checks each `crate::…` path against that table.
//!
//! Run it alone with `cargo test -p agentplane-engine --test layers`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The engine's layers, bottom first, as ARCHITECTURE.md writes them: the table between
/// `<!-- engine-layers:begin -->` and `<!-- engine-layers:end -->`, one layer per row,
/// its modules in backticks in the second column.
fn layers() -> Vec<Vec<String>> {
    let doc =
        std::fs::read_to_string(repo_root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let begin = doc
        .find("<!-- engine-layers:begin -->")
        .expect("engine-layers:begin marker");
    let end = doc
        .find("<!-- engine-layers:end -->")
        .expect("engine-layers:end marker");
    doc[begin..end]
        .lines()
        .filter(|line| {
            line.starts_with('|') && !line.starts_with("| ---") && !line.contains("| Layer")
        })
        .map(|row| {
            let modules = row.split('|').nth(2).unwrap_or_default();
            modules
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Source text without comments, so a path in a doc link is not an import.
fn code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |i| &after[i..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |i| &after[i + 2..]);
        } else {
            let c = rest.chars().next().unwrap_or_default();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// The top-level modules named by `crate::name` and `crate::{a, b::c}` in `code`.
fn imported(code: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut found = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let after = &code[at + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            // The top-level items of the group: split on commas outside inner braces.
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.insert(ident(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 {
                    item.push(c);
                }
            }
            found.insert(ident(&item));
        } else {
            found.insert(ident(after));
        }
    }
    found.remove("");
    found
}

/// Every top-level module of the engine and the modules its files import.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("engine source dir") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(&src).expect("under src");
            let first = relative.components().next().expect("a component");
            let top = first
                .as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_owned();
            if top == "lib" {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("source file");
            let entry = graph.entry(top.clone()).or_default();
            entry.extend(imported(&code(&text)).into_iter().filter(|m| *m != top));
        }
    }
    graph
}

#[test]
fn every_module_imports_only_the_layers_below_its_own() {
    let layers = layers();
    assert!(
        layers.len() >= 4,
        "the layer table was not found or is too short: {layers:?}"
    );
    let layer_of: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(i, modules)| modules.iter().map(move |m| (m.as_str(), i)))
        .collect();
    let graph = imports();
    let mut wrong = Vec::new();
    for (module, uses) in &graph {
        let Some(&own) = layer_of.get(module.as_str()) else {
            wrong.push(format!(
                "`{module}` is in no layer: add it to ARCHITECTURE.md's table"
            ));
            continue;
        };
        for used in uses {
            match layer_of.get(used.as_str()) {
                Some(&layer) if layer < own => {}
                Some(_) => wrong.push(format!(
                    "`{module}` (layer {}) imports `{used}` (layer {}): only lower layers may be imported",
                    own + 1,
                    layer_of[used.as_str()] + 1
                )),
                None => wrong.push(format!("`{module}` imports `{used}`, which is in no layer")),
            }
        }
    }
    for module in layer_of.keys() {
        if !graph.contains_key(*module) {
            wrong.push(format!(
                "ARCHITECTURE.md names `{module}`, which the engine does not have"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "engine layering broken:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_import_scanner_sees_groups_and_ignores_comments() {
    let text =
        "use crate::{a::X, b::{c, d}, e};\n// crate::f\n/* crate::g */ let x = crate::h::y();";
    let found: Vec<String> = imported(&code(text)).into_iter().collect();
    assert_eq!(found, ["a", "b", "e", "h"]);
}
