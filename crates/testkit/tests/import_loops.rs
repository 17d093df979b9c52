//! No new import loop among the files of Manifold's product crates. Files that import each other
//! in a loop cannot be read, tested or changed one at a time; the loops that predate this check
//! are listed in `known_import_loops.txt` and may only shrink. A file that joins a loop, or a new
//! loop, fails here with the files that make it.
//!
//! The graph is read from the sources as text: each `crate::`, `super::` and `self::` path in a
//! file (in `use` items and inline) is an edge to the file of the longest module it names, or,
//! when that module re-exports the item the path goes on to name (`pub use child::Item`), to the
//! child that defines it: a facade's re-exports hide no loop behind it. Unit test modules (`#[cfg(test)] mod tests`) are left out: they import their parent by design.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use manifold_testkit::PRODUCT_CRATES;

/// One crate's modules: module path (`a::b`, `""` for the root) to its file, relative to the
/// workspace.
fn modules(src: &Path, root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap();
            let mut parts: Vec<String> = relative
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            let file = parts.pop().unwrap();
            if parts.first().map(String::as_str) == Some("bin") {
                continue;
            }
            match file.as_str() {
                "lib.rs" | "main.rs" if parts.is_empty() => {}
                "mod.rs" => {}
                "tests.rs" => continue,
                other => parts.push(other.trim_end_matches(".rs").to_owned()),
            }
            let shown = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            out.insert(parts.join("::"), shown);
        }
    }
    out
}

/// The source without comments and without a trailing `#[cfg(test)] mod tests { ... }`.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests {") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(at) => &l[..at],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths a file names from its own crate, each as segments from the crate root, given the
/// file's own module (`super::` and `self::` are resolved against it).
fn named_paths(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let starts = ["crate::", "super::", "self::"];
    let mut i = 0;
    while i < bytes.len() {
        if !code.is_char_boundary(i) {
            i += 1;
            continue;
        }
        let preceded_by_ident =
            i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        let Some(start) = starts
            .iter()
            .find(|s| !preceded_by_ident && code[i..].starts_with(**s))
        else {
            i += 1;
            continue;
        };
        let mut base: Vec<String> = match *start {
            "crate::" => Vec::new(),
            "self::" => module.to_vec(),
            _ => module[..module.len().saturating_sub(1)].to_vec(),
        };
        let mut j = i + start.len();
        // Further `super::` steps.
        while code[j..].starts_with("super::") {
            base.pop();
            j += "super::".len();
        }
        j = read_tree(code, j, &base, &mut out);
        i = j.max(i + 1);
    }
    out
}

/// Whether a relative path (`name::`) starts at `at`: an identifier, not a keyword of paths.
fn relative_path_at(code: &str, at: usize) -> bool {
    let bytes = code.as_bytes();
    let mut end = at;
    while bytes
        .get(end)
        .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
    {
        end += 1;
    }
    end > at
        && !bytes[at].is_ascii_digit()
        && code[end..].starts_with("::")
        && !matches!(&code[at..end], "crate" | "super" | "self" | "Self")
}

/// Reads a use tree at `at` (a path, possibly ending in `{...}`), adding each full path under
/// `base` to `out`; returns where it ended.
fn read_tree(code: &str, mut at: usize, base: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let bytes = code.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut path = base.to_vec();
    loop {
        if bytes.get(at) == Some(&b'{') {
            at += 1;
            loop {
                while bytes.get(at).is_some_and(|b| b.is_ascii_whitespace()) {
                    at += 1;
                }
                if bytes.get(at).is_none_or(|b| *b == b'}') {
                    return at + 1;
                }
                if code[at..].starts_with("self") && !bytes.get(at + 4).copied().is_some_and(ident)
                {
                    out.push(path.clone());
                    at += 4;
                } else {
                    at = read_tree(code, at, &path, out);
                }
                while bytes.get(at).is_some_and(|b| *b != b',' && *b != b'}') {
                    at += 1;
                }
                if bytes.get(at) == Some(&b',') {
                    at += 1;
                }
            }
        }
        let start = at;
        while bytes.get(at).copied().is_some_and(ident) {
            at += 1;
        }
        if at > start {
            path.push(code[start..at].to_owned());
        }
        if at > start && code[at..].starts_with("::") {
            at += 2;
            continue;
        }
        out.push(path);
        return at;
    }
}

/// What a file re-exports (`pub use child::{A, b::C}`, `pub use super::other::D`), by the name
/// it is known by here: the full path of its definition. A path naming such an item through the
/// parent is an edge to the child that defines it, not to the parent.
fn reexports(code: &str, module: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for head in ["pub use ", "pub(crate) use ", "pub(super) use "] {
        let mut from = 0;
        while let Some(found) = code[from..].find(head) {
            let at = from + found + head.len();
            from = at;
            let end = code[at..].find(';').map_or(code.len(), |e| at + e);
            let mut paths = Vec::new();
            if relative_path_at(code, at) {
                read_tree(code, at, module, &mut paths);
            } else {
                paths = named_paths(&code[at..end], module);
            }
            for path in paths {
                if let Some(name) = path.last() {
                    out.insert(name.clone(), path);
                }
            }
        }
    }
    out
}

/// The files each file imports, within one crate.
fn edges(root: &Path, krate: &str) -> BTreeMap<String, BTreeSet<String>> {
    let src = root.join("crates").join(krate).join("src");
    let modules = modules(&src, root);
    let exports: BTreeMap<String, BTreeMap<String, Vec<String>>> = modules
        .iter()
        .map(|(module, file)| {
            let code = code_of(&std::fs::read_to_string(root.join(file)).unwrap());
            (module.clone(), reexports(&code, &segments_of(module)))
        })
        .collect();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, file) in &modules {
        let segments = segments_of(module);
        // A `mod.rs` or a file with children is its module; `super::` from it is its parent.
        let code = code_of(&std::fs::read_to_string(root.join(file)).unwrap());
        let targets = out.entry(file.clone()).or_default();
        for path in named_paths(&code, &segments) {
            let Some(target) = resolve(&path, &modules, &exports) else {
                continue;
            };
            if target != file && !path.is_empty() {
                targets.insert(target.clone());
            }
        }
    }
    out
}

fn segments_of(module: &str) -> Vec<String> {
    if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").map(str::to_owned).collect()
    }
}

/// The file a path names: its longest module, or, when that module re-exports the item the path
/// goes on to name, the module that defines it.
fn resolve<'m>(
    path: &[String],
    modules: &'m BTreeMap<String, String>,
    exports: &BTreeMap<String, BTreeMap<String, Vec<String>>>,
) -> Option<&'m String> {
    let longest = |path: &[String]| {
        (0..=path.len())
            .rev()
            .find(|n| modules.contains_key(&path[..*n].join("::")))
    };
    let n = longest(path)?;
    let module = path[..n].join("::");
    if let Some(item) = path.get(n)
        && let Some(defined) = exports.get(&module).and_then(|e| e.get(item))
        && let Some(m) = longest(defined)
        && defined[..m].join("::") != module
    {
        return modules.get(&defined[..m].join("::"));
    }
    modules.get(&module)
}

/// The strongly connected components of more than one file (Tarjan's algorithm).
fn loops(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct State<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        next: usize,
        found: Vec<BTreeSet<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        let graph = s.graph;
        for w in graph.get(v).into_iter().flatten() {
            let w = w.as_str();
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
            let mut component = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.insert(w.to_owned());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.found
}

fn workspace_root() -> PathBuf {
    manifold_testkit::workspace_root()
}

/// The loops that predate this check: one per line, its files separated by spaces.
fn known() -> Vec<BTreeSet<String>> {
    let text = std::fs::read_to_string(
        workspace_root().join("crates/testkit/tests/known_import_loops.txt"),
    )
    .unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

#[test]
fn no_file_of_a_product_crate_joins_an_import_loop() {
    let root = workspace_root();
    let known = known();
    let mut new = Vec::new();
    let mut all = Vec::new();
    for krate in PRODUCT_CRATES {
        for component in loops(&edges(&root, krate)) {
            if !known.iter().any(|k| component.is_subset(k)) {
                new.push(component.clone());
            }
            all.push(component);
        }
    }
    let listed: Vec<String> = all
        .iter()
        .map(|c| c.iter().cloned().collect::<Vec<_>>().join(" "))
        .collect();
    assert!(
        new.is_empty(),
        "files that import each other in a loop, not known before: {new:#?}\n\
         Break the loop (move what both need below both, or pass it in). The loops as they are now, \
         for crates/testkit/tests/known_import_loops.txt once one shrinks:\n{}",
        listed.join("\n")
    );
}

#[test]
fn the_reader_finds_a_loop_it_is_shown_and_none_in_a_chain() {
    let dir = std::env::temp_dir().join(format!("import-loops-{}", std::process::id()));
    let src = dir.join("crates/demo/src");
    std::fs::create_dir_all(src.join("net")).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "mod a;\nmod b;\nmod c;\nmod d;\nmod e;\nmod net;\n",
    )
    .unwrap();
    // What d re-exports from its sibling b is b's: e's import of it is an edge to b.
    std::fs::write(src.join("d.rs"), "pub use super::b::Thing;\n").unwrap();
    std::fs::write(src.join("e.rs"), "use crate::d::Thing;\n").unwrap();
    // `Vec::new` is a relative path that names no module: no edge.
    std::fs::write(
        src.join("a.rs"),
        "use crate::{b::Thing, c};\nfn v() -> Vec<u8> { Vec::new() }\n",
    )
    .unwrap();
    // A comment naming crate::a is no import; a test module's import is left out.
    std::fs::write(
        src.join("b.rs"),
        "// crate::a::X\npub struct Thing;\n#[cfg(test)]\nmod tests {\n    use crate::a;\n}\n",
    )
    .unwrap();
    std::fs::write(src.join("c.rs"), "pub fn f() { crate::net::send(); }\n").unwrap();
    // `crate::net::send` names what net re-exports from wire: an edge to wire.
    std::fs::write(
        src.join("net/mod.rs"),
        "pub mod wire;\npub use wire::send;\n",
    )
    .unwrap();
    std::fs::write(
        src.join("net/wire.rs"),
        "use super::super::c;\npub fn send() {}\n",
    )
    .unwrap();
    let graph = edges(&dir, "demo");
    let found = loops(&graph);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(found.len(), 1, "{graph:#?}");
    let files: Vec<&str> = found[0].iter().map(String::as_str).collect();
    assert_eq!(
        files,
        ["crates/demo/src/c.rs", "crates/demo/src/net/wire.rs"],
        "{graph:#?}"
    );
    assert!(
        graph["crates/demo/src/a.rs"].contains("crates/demo/src/b.rs"),
        "{graph:#?}"
    );
    assert!(graph["crates/demo/src/b.rs"].is_empty(), "{graph:#?}");
    let e: Vec<&str> = graph["crates/demo/src/e.rs"]
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(e, ["crates/demo/src/b.rs"], "{graph:#?}");
}
