//! No task-local in Manifold's product crates. A fact a function reads from a task-local is one
//! its signature does not show, and one a spawned task silently loses: a request's facts travel
//! one way, in values (the request context, the call's options, the answer a stage returns).
//! Any `task_local!` in a product crate's sources fails here, with where it is.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use manifold_testkit::{PRODUCT_CRATES, workspace_root};

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().and_then(|e| e.to_str()) == Some("rs") {
                out.push(path);
            }
        }
    }
    out
}

/// `file:line` of each line of `text` that declares a task-local (comments aside).
fn task_locals(file: &str, text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            let code = line.split("//").next().unwrap_or_default();
            code.contains("task_local!")
        })
        .map(|(n, _)| format!("{file}:{}", n + 1))
        .collect()
}

#[test]
fn no_product_crate_declares_a_task_local() {
    let root = workspace_root();
    let mut found = Vec::new();
    for krate in PRODUCT_CRATES {
        let src = root.join("crates").join(krate).join("src");
        for file in sources(&src) {
            let text = std::fs::read_to_string(&file).unwrap();
            let shown = file.strip_prefix(&root).unwrap().display().to_string();
            found.extend(task_locals(&shown, &text));
        }
    }
    assert!(
        found.is_empty(),
        "task-locals in product crates: {found:#?}\nPass the fact down in a value instead (the \
         request context, the call's options, or what the stage returns)."
    );
}

#[test]
fn the_reader_finds_a_declaration_and_skips_a_comment() {
    let text = "// tokio::task_local! in a comment\nfn f() {}\ntokio::task_local! {\n    static X: u8;\n}\n";
    assert_eq!(task_locals("a.rs", text), vec!["a.rs:3".to_owned()]);
}
