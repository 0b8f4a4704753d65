//! Every arrow between our crates is a reviewed decision: each crate's dependencies on
//! other agentplane crates (from `cargo metadata`) must be exactly those ARCHITECTURE.md
//! allows in its table between `<!-- crate-deps:begin -->` and `<!-- crate-deps:end -->`.
//! A new arrow fails here until the table (and the review that changes it) says so; a
//! removed one fails until the table forgets it, so the table stays exact.
//!
//! Run it alone with `cargo test -p agentplane-suites --test architecture`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// (crate, kind) → our crates it depends on; kind is "normal" (build dependencies count
/// as normal) or "dev".
type Arrows = BTreeMap<(String, &'static str), BTreeSet<String>>;

fn repo_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The arrows the workspace has, from `cargo metadata`.
fn actual() -> Arrows {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(repo_root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let packages = metadata["packages"].as_array().expect("packages");
    let ours: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    let mut arrows = Arrows::new();
    for package in packages {
        let name = package["name"].as_str().expect("a package name").to_owned();
        arrows.entry((name.clone(), "normal")).or_default();
        arrows.entry((name.clone(), "dev")).or_default();
        for dep in package["dependencies"].as_array().expect("dependencies") {
            let Some(target) = dep["name"].as_str().filter(|d| ours.contains(d)) else {
                continue;
            };
            let kind = if dep["kind"].as_str() == Some("dev") {
                "dev"
            } else {
                "normal"
            };
            arrows
                .entry((name.clone(), kind))
                .or_default()
                .insert(target.to_owned());
        }
    }
    arrows
}

/// The arrows ARCHITECTURE.md allows: one row per crate, `| `crate` | deps | dev deps |`,
/// each list in backticks (or `—` for none).
fn allowed() -> Arrows {
    let doc =
        std::fs::read_to_string(repo_root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let begin = doc
        .find("<!-- crate-deps:begin -->")
        .expect("crate-deps:begin marker");
    let end = doc
        .find("<!-- crate-deps:end -->")
        .expect("crate-deps:end marker");
    let names = |cell: &str| -> BTreeSet<String> {
        cell.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    };
    let mut arrows = Arrows::new();
    for row in doc[begin..end].lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = row.split('|').collect();
        assert!(cells.len() >= 5, "a row of three cells: {row}");
        let name = names(cells[1]).into_iter().next().expect("a crate name");
        arrows.insert((name.clone(), "normal"), names(cells[2]));
        arrows.insert((name, "dev"), names(cells[3]));
    }
    arrows
}

#[test]
fn every_arrow_between_our_crates_is_in_the_architecture_table() {
    let actual = actual();
    let allowed = allowed();
    assert!(actual.len() >= 20, "too few crates seen: {actual:?}");
    let mut wrong = Vec::new();
    for ((name, kind), deps) in &actual {
        let Some(allowed_deps) = allowed.get(&(name.clone(), *kind)) else {
            wrong.push(format!(
                "`{name}` has no row in ARCHITECTURE.md's crate table"
            ));
            continue;
        };
        for dep in deps.difference(allowed_deps) {
            wrong.push(format!(
                "`{name}` → `{dep}` ({kind}) is not allowed by ARCHITECTURE.md"
            ));
        }
        for dep in allowed_deps.difference(deps) {
            wrong.push(format!(
                "ARCHITECTURE.md allows `{name}` → `{dep}` ({kind}), which no longer exists: remove it"
            ));
        }
    }
    for (name, _) in allowed.keys() {
        if !actual.contains_key(&(name.clone(), "normal")) {
            wrong.push(format!(
                "ARCHITECTURE.md names `{name}`, which is not a workspace crate"
            ));
        }
    }
    wrong.dedup();
    assert!(
        wrong.is_empty(),
        "crate dependencies differ from ARCHITECTURE.md:\n{}",
        wrong.join("\n")
    );
}

/// ARCHITECTURE.md's index of decisions (between `<!-- adr-index:begin -->` and
/// `<!-- adr-index:end -->`) links every record in `docs/adr/` exactly once, and only
/// records that exist.
#[test]
fn every_decision_record_is_in_the_index() {
    let doc =
        std::fs::read_to_string(repo_root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let begin = doc
        .find("<!-- adr-index:begin -->")
        .expect("adr-index:begin marker");
    let end = doc
        .find("<!-- adr-index:end -->")
        .expect("adr-index:end marker");
    let mut listed: Vec<String> = doc[begin..end]
        .split("](docs/adr/")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(str::to_owned)
        .collect();
    let unique: BTreeSet<String> = listed.iter().cloned().collect();
    assert_eq!(
        unique.len(),
        listed.len(),
        "a record is listed twice: {listed:?}"
    );
    listed.sort();
    let mut records: Vec<String> = std::fs::read_dir(repo_root().join("docs/adr"))
        .expect("docs/adr")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| {
            name.ends_with(".md") && name.as_bytes().first().is_some_and(u8::is_ascii_digit)
        })
        .collect();
    records.sort();
    assert!(records.len() > 50, "the records were read: {records:?}");
    assert_eq!(
        listed, records,
        "ARCHITECTURE.md's decisions index and docs/adr/ differ"
    );
}
