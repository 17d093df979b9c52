//! Why: `manifold add`/`remove` are how a new user grows a configuration from the shell, and the
//! completion scripts and man pages are generated from the same command-line definition. These run
//! the real binary: a stdio server added after `--` and an HTTP one by URL land in a file `manifold
//! check` accepts with its comments kept, a removal takes one section out, and every shell's script
//! and the man pages name the commands.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use manifold_testkit::ScratchDir;

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");

fn run(args: &[&str], dir: &std::path::Path) -> (i32, String, String) {
    let out = Command::new(MANIFOLD)
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn add_and_remove_edit_manifold_toml_in_place_and_check_accepts_the_result() {
    let dir = ScratchDir::new("cli-edit").unwrap();
    let config = dir.path().join("manifold.toml");
    std::fs::write(
        &config,
        "# servers for the team\n[gateway]\nlisten = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    let (code, out, err) = run(
        &[
            "add",
            "time",
            "--env",
            "TZ=UTC",
            "--",
            "uvx",
            "mcp-server-time",
            "--local-timezone",
            "UTC",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("added [servers.time]"), "{out}");
    let (code, out, err) = run(
        &[
            "add",
            "docs",
            "https://mcp.example.com/mcp",
            "--header",
            "X-Team=core",
        ],
        dir.path(),
    );
    assert_eq!(code, 0, "{out}{err}");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.starts_with("# servers for the team\n"), "{text}");
    assert!(
        text.contains("[servers.time]\ncommand = \"uvx\"\nargs = [\"mcp-server-time\", \"--local-timezone\", \"UTC\"]\nenv = { TZ = \"UTC\" }"),
        "{text}"
    );
    let (code, out, err) = run(&["check"], dir.path());
    assert_eq!(code, 0, "check accepts the edited file: {out}{err}");

    let (code, _, err) = run(&["add", "time", "--", "other"], dir.path());
    assert_ne!(code, 0);
    assert!(
        err.contains("already configures a server \"time\""),
        "{err}"
    );

    let (code, out, err) = run(&["remove", "docs"], dir.path());
    assert_eq!(code, 0, "{out}{err}");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(
        !text.contains("mcp.example.com") && text.contains("mcp-server-time"),
        "{text}"
    );
}

#[test]
fn completion_scripts_and_man_pages_name_every_command() {
    let dir = ScratchDir::new("cli-reference").unwrap();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let (code, out, err) = run(&["completions", shell], dir.path());
        assert_eq!(code, 0, "{shell}: {err}");
        for command in ["serve", "approvals", "audit", "add", "completions"] {
            assert!(out.contains(command), "{shell} completion lacks {command}");
        }
    }
    let (code, out, _) = run(&["man"], dir.path());
    assert_eq!(code, 0);
    assert!(out.contains(".TH manifold"), "{out}");
    assert!(out.contains("approvals"), "{out}");
    let pages = dir.path().join("man");
    let (code, _, err) = run(&["man", "--out-dir", pages.to_str().unwrap()], dir.path());
    assert_eq!(code, 0, "{err}");
    for page in ["manifold.1", "manifold-serve.1", "manifold-approvals.1"] {
        assert!(pages.join(page).exists(), "{page} was not written");
    }
}
