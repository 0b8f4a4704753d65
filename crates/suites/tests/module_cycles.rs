//! No import circle between the modules of a crate. This test reads every source file
//! under a crate's `src/`, names each file's module from its path (`a/mod.rs` and
//! `a.rs` are `a`, `a/b.rs` is `a::b`), and draws an arrow from a module to every
//! module it names: in a `use` declaration, or in a path that starts with `crate::`,
//! `super::`, `self::`, one of its child modules or a name a `use` brought in. Each
//! arrow goes to the deepest module the path reaches (`crate::settings::llm::Config`
//! is an arrow to `settings::llm`), and a name a module only brings in with `use` (a
//! re-export) is followed to the module that defines it. Declaring a child (`mod x;`)
//! is not an arrow, so a child may use its parent as long as the parent does not use
//! the child back.
//! Comments, strings and `#[cfg(test)]` items are left out: tests may look anywhere.
//!
//! A circle is a set of modules each reachable from every other (a strongly connected
//! component of more than one module); the failure lists them with where each arrow
//! inside it is written, so the edge to cut is visible.
//!
//! Crates checked: every member of the workspace, read from the root `Cargo.toml`, so a
//! new crate is held to this without being named here. The engine is also held by its
//! own layer test (`crates/engine/tests/layers.rs`), which fixes the order of its
//! top-level modules; this test sees inside them too.
//!
//! Run it alone with `cargo test -p agentplane-suites --test module_cycles`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace's crates (relative to the repository root): the `members` of the root
/// `Cargo.toml`.
fn workspace_crates() -> Vec<String> {
    let manifest = std::fs::read_to_string(repo_root().join("Cargo.toml")).expect("Cargo.toml");
    let start = manifest
        .find("members = [")
        .expect("a members list in the root Cargo.toml");
    let list = &manifest[start + "members = [".len()..];
    let list = &list[..list.find(']').expect("the members list ends")];
    list.lines()
        .map(|line| line.split('#').next().unwrap_or_default())
        .flat_map(|line| line.split(','))
        .map(|item| item.trim().trim_matches('"'))
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A module's path inside its crate: `[]` is the crate root.
type Module = Vec<String>;

/// Module → module it names → where (file:line of the first place that names it).
type Graph = BTreeMap<Module, BTreeMap<Module, String>>;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn show(module: &[String]) -> String {
    if module.is_empty() {
        "crate".to_owned()
    } else {
        module.join("::")
    }
}

/// Source text with comments, string and character literals and `#[cfg(test)]` items
/// blanked out; newlines are kept so line numbers still point into the file.
fn code(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied().unwrap_or('\0');
        if c == '/' && next == '/' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    blank(&mut out, ' ');
                    i += 1;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    blank(&mut out, ' ');
                    i += 1;
                    if depth == 0 {
                        blank(&mut out, ' ');
                        i += 1;
                        break;
                    }
                }
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else if c == 'r'
            && (next == '"' || next == '#')
            && !chars
                .get(i.wrapping_sub(1))
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
            && raw_string_end(&chars, i + 1).is_some()
        {
            let end = raw_string_end(&chars, i + 1).unwrap_or(chars.len());
            while i < end {
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else if c == '"' {
            blank(&mut out, c);
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
                if i < chars.len() {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
            blank(&mut out, ' ');
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{1F600}'); otherwise a lifetime.
            let close = if next == '\\' {
                (i + 2..chars.len().min(i + 12)).find(|&j| chars[j] == '\'')
            } else {
                (chars.get(i + 2) == Some(&'\'')).then_some(i + 2)
            };
            match close {
                Some(end) => {
                    while i <= end {
                        blank(&mut out, chars[i]);
                        i += 1;
                    }
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
        // A line comment ends before its newline, which the next round copies.
    }
    without_test_items(&out)
}

/// Where a raw string starting at `at` (just after the `r`) ends (one past its last
/// `"`), if `at` starts one (`"` or `#…#"`).
fn raw_string_end(chars: &[char], at: usize) -> Option<usize> {
    let hashes = chars[at..].iter().take_while(|c| **c == '#').count();
    if chars.get(at + hashes) != Some(&'"') {
        return None;
    }
    let mut i = at + hashes + 1;
    while i < chars.len() {
        if chars[i] == '"'
            && chars[i + 1..]
                .iter()
                .take(hashes)
                .filter(|c| **c == '#')
                .count()
                == hashes
        {
            return Some(i + 1 + hashes);
        }
        i += 1;
    }
    Some(chars.len())
}

/// `text` with every item behind `#[cfg(test)]` blanked out (up to its `;`, or its
/// closing brace).
fn without_test_items(text: &str) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    let len = chars.len();
    let marker: Vec<char> = "#[cfg(test)]".chars().collect();
    let mut i = 0;
    while i + marker.len() <= chars.len() {
        if chars[i..i + marker.len()] != marker[..] {
            i += 1;
            continue;
        }
        let start = i;
        let mut j = i + marker.len();
        let mut depth = 0usize;
        while j < chars.len() {
            match chars[j] {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        break;
                    }
                }
                ';' if depth == 0 => break,
                _ => {}
            }
            j += 1;
        }
        for c in chars.iter_mut().take((j + 1).min(len)).skip(start) {
            if *c != '\n' {
                *c = ' ';
            }
        }
        i = j + 1;
    }
    chars.into_iter().collect()
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Path,
    Open,
    Close,
    Comma,
    Semi,
    Star,
    Other,
}

/// Tokens with their line numbers (1-based).
fn tokens(code: &str) -> Vec<(Token, usize)> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            out.push((Token::Ident(word.trim_start_matches("r#").to_owned()), line));
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push((Token::Path, line));
            i += 2;
        } else {
            let token = match c {
                '{' => Token::Open,
                '}' => Token::Close,
                ',' => Token::Comma,
                ';' => Token::Semi,
                '*' => Token::Star,
                _ => Token::Other,
            };
            out.push((token, line));
            i += 1;
        }
    }
    out
}

/// One name a `use` declaration brings in: the path it names and the name it is
/// known by (`None` for a glob, `*`).
#[derive(Debug, Clone, PartialEq)]
struct Import {
    path: Vec<String>,
    name: Option<String>,
    line: usize,
}

/// The imports of the use tree starting at `tokens[*at]`, under `prefix`.
fn use_tree(tokens: &[(Token, usize)], at: &mut usize, prefix: &[String], out: &mut Vec<Import>) {
    let mut path = prefix.to_vec();
    while let Some((token, line)) = tokens.get(*at) {
        match token {
            Token::Ident(word) if word == "as" => {
                *at += 1;
                if let Some((Token::Ident(alias), _)) = tokens.get(*at) {
                    let name = (alias != "_").then(|| alias.clone());
                    out.push(Import {
                        path: path.clone(),
                        name,
                        line: *line,
                    });
                    *at += 1;
                }
                return;
            }
            Token::Ident(word) => {
                path.push(word.clone());
                *at += 1;
                if tokens.get(*at).map(|t| &t.0) != Some(&Token::Path) {
                    let mut full = path.clone();
                    let name = if word == "self" {
                        full.pop();
                        full.last().cloned()
                    } else {
                        Some(word.clone())
                    };
                    out.push(Import {
                        path: full,
                        name,
                        line: *line,
                    });
                    return;
                }
                *at += 1;
            }
            Token::Star => {
                out.push(Import {
                    path: path.clone(),
                    name: None,
                    line: *line,
                });
                *at += 1;
                return;
            }
            Token::Open => {
                *at += 1;
                loop {
                    match tokens.get(*at).map(|t| &t.0) {
                        None => return,
                        Some(Token::Close) => {
                            *at += 1;
                            return;
                        }
                        Some(Token::Comma) => *at += 1,
                        Some(_) => use_tree(tokens, at, &path, out),
                    }
                }
            }
            Token::Path => *at += 1,
            _ => return,
        }
    }
}

/// Paths written outside `use` declarations, each with its line.
type Written = Vec<(Vec<String>, usize)>;

/// A file's `use` imports, and every other path it writes.
fn scan(code: &str) -> (Vec<Import>, Written) {
    let tokens = tokens(code);
    let mut imports = Vec::new();
    let mut paths = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i].0 {
            Token::Ident(word) if word == "use" => {
                i += 1;
                use_tree(&tokens, &mut i, &[], &mut imports);
            }
            Token::Ident(first)
                if tokens.get(i + 1).map(|t| &t.0) == Some(&Token::Path)
                    && (i == 0 || tokens[i - 1].0 != Token::Path) =>
            {
                let line = tokens[i].1;
                let mut path = vec![first.clone()];
                i += 1;
                while tokens.get(i).map(|t| &t.0) == Some(&Token::Path) {
                    match tokens.get(i + 1).map(|t| &t.0) {
                        Some(Token::Ident(next)) => {
                            path.push(next.clone());
                            i += 2;
                        }
                        _ => break,
                    }
                }
                paths.push((path, line));
            }
            _ => i += 1,
        }
    }
    (imports, paths)
}

/// The module a file under `src` defines.
fn module_of(relative: &Path) -> Module {
    let mut parts: Vec<String> = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|last| last == "mod") || parts == ["lib"] || parts == ["main"] {
        parts.pop();
    }
    parts
}

/// The import graph of the modules whose files are given (module → source text).
fn graph(files: &BTreeMap<Module, (String, String)>) -> Graph {
    let modules: BTreeSet<&Module> = files.keys().collect();
    let scanned: BTreeMap<&Module, (Vec<Import>, Written)> = files
        .iter()
        .map(|(module, (_, text))| (module, scan(&code(text))))
        .collect();

    // Where a path written in `module` points, as a path from the crate root; `None` for
    // another crate's, or a name of this module's own.
    fn absolute(
        module: &Module,
        path: &[String],
        modules: &BTreeSet<&Module>,
        names: &BTreeMap<String, Vec<String>>,
    ) -> Option<Vec<String>> {
        let (first, rest) = path.split_first()?;
        let mut base = match first.as_str() {
            "crate" => Vec::new(),
            "self" => module.clone(),
            "super" => {
                let mut base = module.clone();
                base.pop();
                base
            }
            _ => {
                let mut child = module.clone();
                child.push(first.clone());
                if modules.contains(&child) {
                    return Some([module.clone(), path.to_vec()].concat());
                }
                let mut base = names.get(first)?.clone();
                base.extend(rest.iter().cloned());
                return Some(base);
            }
        };
        let mut rest = rest;
        while first == "super" && rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    // The names each module's `use`s bring in, from the crate (resolved in order).
    let mut names: BTreeMap<&Module, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for (module, (imports, _)) in &scanned {
        let mut own = BTreeMap::new();
        for import in imports {
            let Some(name) = &import.name else { continue };
            if let Some(path) = absolute(module, &import.path, &modules, &own) {
                own.insert(name.clone(), path);
            }
        }
        names.insert(module, own);
    }
    // A glob import (`use super::*`) brings the names of the module it reads.
    let mut with_globs = names.clone();
    for (module, (imports, _)) in &scanned {
        for import in imports.iter().filter(|i| i.name.is_none()) {
            let Some(target) = absolute(module, &import.path, &modules, &names[module]) else {
                continue;
            };
            if let Some(theirs) = names.get(&target) {
                let own = with_globs.entry(module).or_default();
                for (name, path) in theirs {
                    own.entry(name.clone()).or_insert_with(|| path.clone());
                }
            }
            let children = modules
                .iter()
                .filter(|m| m.len() == target.len() + 1 && m.starts_with(&target));
            for child in children {
                let own = with_globs.entry(module).or_default();
                if let Some(last) = child.last() {
                    own.entry(last.clone()).or_insert_with(|| (*child).clone());
                }
            }
        }
    }

    let mut graph = Graph::new();
    for (module, (imports, paths)) in &scanned {
        let file = &files[*module].0;
        let arrows = graph.entry((*module).clone()).or_default();
        let written = imports
            .iter()
            .map(|i| (&i.path, i.line))
            .chain(paths.iter().map(|(p, line)| (p, *line)));
        for (path, line) in written {
            let Some(full) = absolute(module, path, &modules, &with_globs[module]) else {
                continue;
            };
            let Some(target) = reached(full, &modules, &names) else {
                continue;
            };
            if target != **module {
                arrows
                    .entry(target)
                    .or_insert_with(|| format!("{file}:{line}"));
            }
        }
    }
    graph
}

/// The deepest module `path` (from the crate root) reaches. A name that module only
/// brings in with `use` (a re-export such as the root's `pub use store::Store`) is
/// followed to where it is defined, so the arrow goes there.
fn reached(
    mut path: Vec<String>,
    modules: &BTreeSet<&Module>,
    names: &BTreeMap<&Module, BTreeMap<String, Vec<String>>>,
) -> Option<Module> {
    for _ in 0..8 {
        let module = (0..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|prefix| modules.contains(prefix))?;
        let followed = path
            .get(module.len())
            .and_then(|name| names.get(&module)?.get(name));
        match followed {
            Some(target) if *target != path[..=module.len()] => {
                path = [target.clone(), path[module.len() + 1..].to_vec()].concat();
            }
            _ => return Some(module),
        }
    }
    None
}

/// The modules of every circle: the strongly connected components of more than one
/// module (Tarjan's algorithm).
fn circles(graph: &Graph) -> Vec<Vec<Module>> {
    struct State<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g Module, usize>,
        low: BTreeMap<&'g Module, usize>,
        stack: Vec<&'g Module>,
        on_stack: BTreeSet<&'g Module>,
        found: Vec<Vec<Module>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g Module) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flat_map(|arrows| arrows.keys()) {
            let Some((w, _)) = s.graph.get_key_value(w) else {
                continue;
            };
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !state.index.contains_key(v) {
            visit(&mut state, v);
        }
    }
    state.found.sort();
    state.found
}

/// Every `.rs` file under `src`, by module: (path for messages, text).
fn crate_files(krate: &str) -> BTreeMap<Module, (String, String)> {
    let src = repo_root().join(krate).join("src");
    let mut files = BTreeMap::new();
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(&src).expect("under src");
                let text = std::fs::read_to_string(&path).expect("a source file");
                let shown = format!("{krate}/src/{}", relative.display());
                files.insert(module_of(relative), (shown, text));
            }
        }
    }
    files
}

/// The circles of `graph`, each with the arrows inside it, for a failure message.
fn describe(graph: &Graph, circles: &[Vec<Module>]) -> String {
    let mut out = String::new();
    for circle in circles {
        let names: Vec<String> = circle.iter().map(|m| show(m)).collect();
        out.push_str(&format!("circle: {}\n", names.join(", ")));
        for from in circle {
            for (to, at) in &graph[from] {
                if circle.contains(to) {
                    out.push_str(&format!("  {} → {} ({at})\n", show(from), show(to)));
                }
            }
        }
    }
    out
}

#[test]
fn no_import_circle_between_modules() {
    let crates = workspace_crates();
    assert!(
        crates.len() >= 15 && crates.iter().any(|c| c == "crates/engine"),
        "the workspace members were not read: {crates:?}"
    );
    let (mut files_seen, mut arrows_seen) = (0, 0);
    let mut failures = String::new();
    for krate in &crates {
        let files = crate_files(krate);
        assert!(!files.is_empty(), "no source file seen in {krate}");
        let graph = graph(&files);
        files_seen += files.len();
        arrows_seen += graph.values().map(BTreeMap::len).sum::<usize>();
        let found = circles(&graph);
        if !found.is_empty() {
            failures.push_str(&format!(
                "{krate} has import circles between its modules:\n{}",
                describe(&graph, &found)
            ));
        }
    }
    assert!(
        arrows_seen >= files_seen,
        "too few arrows seen ({arrows_seen} for {files_seen} files): the scanner reads nothing"
    );
    assert!(failures.is_empty(), "{failures}");
}

/// A small crate written here: the scanner must see each kind of arrow, skip what is
/// not one, and find the circles.
#[test]
fn the_scanner_sees_every_kind_of_arrow_and_finds_circles() {
    let files: BTreeMap<Module, (String, String)> = [
        (
            "lib.rs",
            "//! crate::c in a comment is no arrow\nmod a;\nmod b;\nmod c;\nmod d;\nmod e;\n",
        ),
        // a → b through a grouped use; b → a through an inline `super::` path.
        ("a.rs", "use crate::{b::{X, Y as Z}, c};\nfn f() {}\n"),
        (
            "b/mod.rs",
            "mod inner;\npub(crate) fn g() { super::a::f(); let s = \"crate::e::no\"; }\n",
        ),
        // A child using its parent is no circle unless the parent uses it back.
        ("b/inner.rs", "use super::*;\nfn h() { g(); }\n"),
        // c: names nothing in this crate (another crate, a char literal, a lifetime).
        (
            "c.rs",
            "use std::fmt;\nfn k<'a>(x: &'a str) -> char { '\"' }\n/* crate::d */\n",
        ),
        // d ↔ d::child: the parent re-exports the child, which reads the parent's names
        // through a glob and a name the parent's `use` brought in.
        (
            "d/mod.rs",
            "mod child;\npub use child::Thing;\nuse crate::e;\n",
        ),
        ("d/child.rs", "use super::*;\npub struct Thing(e::Inner);\n"),
        // e names d only in a test, which does not count.
        (
            "e.rs",
            "pub struct Inner;\n#[cfg(test)]\nmod tests { use crate::d; }\n",
        ),
    ]
    .into_iter()
    .map(|(path, text)| {
        (
            module_of(Path::new(path)),
            (path.to_owned(), text.to_owned()),
        )
    })
    .collect();
    let graph = graph(&files);
    let arrows_of = |module: &str| -> Vec<String> {
        let key: Module = if module == "crate" {
            Vec::new()
        } else {
            module.split("::").map(str::to_owned).collect()
        };
        graph[&key].keys().map(|m| show(m)).collect()
    };
    assert_eq!(arrows_of("crate"), Vec::<String>::new());
    assert_eq!(arrows_of("a"), ["b", "c"]);
    assert_eq!(arrows_of("b"), ["a"]);
    assert_eq!(arrows_of("b::inner"), ["b"]);
    assert_eq!(arrows_of("c"), Vec::<String>::new());
    assert_eq!(arrows_of("d"), ["d::child", "e"]);
    assert_eq!(arrows_of("d::child"), ["d", "e"]);
    assert_eq!(arrows_of("e"), Vec::<String>::new());
    let found: Vec<Vec<String>> = circles(&graph)
        .iter()
        .map(|circle| circle.iter().map(|m| show(m)).collect())
        .collect();
    assert_eq!(found, [vec!["a", "b"], vec!["d", "d::child"]]);
    assert!(describe(&graph, &circles(&graph)).contains("b → a (b/mod.rs:2)"));
}
