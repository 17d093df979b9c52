//! `manifold serve` with stdio servers under `profile = "strict"`: real Node and Python peers
//! still list and answer through the gateway, and a server that reads a file outside its
//! workspace is refused sandboxed while the same server unsandboxed reads it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");

/// A stdio MCP server with one tool, `read`, that returns the text of the file it is given.
const READER_SERVER: &str = r#"
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    method, r = m.get("method"), None
    if method == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "reader", "version": "1"}}
    elif method == "tools/list":
        r = {"tools": [{"name": "read", "inputSchema": {"type": "object",
             "properties": {"path": {"type": "string"}}, "required": ["path"]}}]}
    elif method == "tools/call":
        try:
            text, err = open(m["params"]["arguments"]["path"]).read(), False
        except OSError as e:
            text, err = "refused: %s" % e.strerror, True
        r = {"content": [{"type": "text", "text": text}], "isError": err}
    else:
        r = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}) + "\n")
    sys.stdout.flush()
"#;

struct Serving {
    child: Child,
    url: String,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Starts `manifold serve` with `config`, the launcher built beside the binary.
fn serve(dir: &Path, config: &str) -> Serving {
    let launcher =
        manifold_testkit::workspace_binary("manifold-sandbox", "manifold-sandbox-exec").unwrap();
    assert_eq!(
        launcher.parent(),
        Path::new(MANIFOLD).parent(),
        "the launcher must sit beside manifold"
    );
    let path = dir.join("manifold.toml");
    std::fs::write(&path, config).unwrap();
    let mut child = Command::new(MANIFOLD)
        .args(["serve", "--config", path.to_str().unwrap()])
        .current_dir(dir)
        .env("XDG_DATA_HOME", dir.join("xdg"))
        .env("RUST_LOG", "warn,manifold_upstream=info")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.join("serve.log")).unwrap())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{url:?}");
    Serving { child, url }
}

fn client(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(MANIFOLD).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A world-searchable scratch dir: a sandboxed server run by root runs as nobody, and binds are
/// made as it.
fn scratch(label: &str) -> PathBuf {
    let dir = manifold_testkit::fresh_dir(label).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

#[test]
fn node_and_python_peers_list_and_answer_under_strict() {
    let dir = scratch("sandboxed-peers");
    let node = manifold_testkit::node().unwrap();
    let memory =
        manifold_testkit::npm_package_entry("@modelcontextprotocol/server-memory").unwrap();
    // The venv's own python links into pyenv under /root, which the server's uid (nobody, under
    // a root gateway) cannot search: the system python3 (same minor version) runs its packages.
    let time = manifold_testkit::venv_bin("mcp-server-time").unwrap();
    let venv = time.parent().and_then(Path::parent).unwrap();
    let peers = manifold_testkit::peers_dir().unwrap();
    let node_dir = node.parent().and_then(Path::parent).unwrap();
    let config = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{data}\"\n\n\
         [servers.memory]\ncommand = \"{node}\"\nargs = [\"{memory}\"]\n\
         env = {{ MEMORY_FILE_PATH = \"/workspace/memory.jsonl\" }}\n\
         [servers.memory.sandbox]\nprofile = \"strict\"\nread_only = [\"{peers}\", \"{node_dir}\"]\n\n\
         [servers.time]\ncommand = \"python3\"\n\
         args = [\"-m\", \"mcp_server_time\", \"--local-timezone\", \"UTC\"]\n\
         env = {{ PYTHONPATH = \"{venv}/lib/python3.11/site-packages\" }}\n\
         [servers.time.sandbox]\nprofile = \"strict\"\nread_only = [\"{venv}\"]\n",
        data = path_str(&dir.join("data")),
        node = path_str(&node),
        memory = path_str(&memory),
        peers = path_str(&peers),
        node_dir = path_str(node_dir),
        venv = path_str(venv),
    );
    let s = serve(&dir, &config);
    let (code, out, err) = client(&["list", "tools", &s.url]);
    assert_eq!(code, 0, "{err}");
    for tool in [
        "memory__create_entities",
        "memory__read_graph",
        "time__get_current_time",
    ] {
        assert!(out.contains(tool), "{tool} missing from:\n{out}\n{err}");
    }
    let (code, out, err) = client(&[
        "call",
        &s.url,
        "memory__create_entities",
        "--json",
        r#"{"entities":[{"name":"sandbox","entityType":"test","observations":["inside"]}]}"#,
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let written = dir.join("data/sandbox/memory/workspace/memory.jsonl");
    let text = std::fs::read_to_string(&written).unwrap();
    assert!(text.contains("\"inside\""), "{text}");
    let (code, out, err) = client(&[
        "call",
        &s.url,
        "time__get_current_time",
        "--arg",
        "timezone=UTC",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("UTC"), "{out}");
}

#[test]
fn a_file_outside_the_workspace_is_refused_sandboxed_and_read_unsandboxed() {
    let dir = scratch("sandboxed-secret");
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, "the-secret-value").unwrap();
    let scripts = dir.join("scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    let script = scripts.join("reader.py");
    std::fs::write(&script, READER_SERVER).unwrap();
    let config = format!(
        "[gateway]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{data}\"\n\n\
         [servers.boxed]\ncommand = \"python3\"\nargs = [\"{script}\"]\n\
         [servers.boxed.sandbox]\nprofile = \"strict\"\nread_only = [\"{scripts}\"]\n\n\
         [servers.plain]\ncommand = \"python3\"\nargs = [\"{script}\"]\n\n\
         [servers.loud]\ncommand = \"python3\"\nargs = [\"{script}\"]\n\
         [servers.loud.sandbox]\nprofile = \"off\"\n",
        data = path_str(&dir.join("data")),
        script = path_str(&script),
        scripts = path_str(&scripts),
    );
    let s = serve(&dir, &config);
    let path_arg = format!("path={}", path_str(&secret));
    let (code, out, err) = client(&["call", &s.url, "plain__read", "--arg", &path_arg]);
    assert_eq!((code, out.trim()), (0, "the-secret-value"), "{err}");
    let (code, out, err) = client(&["call", &s.url, "boxed__read", "--arg", &path_arg]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(!out.contains("the-secret-value") && !err.contains("the-secret-value"));
    assert!(
        format!("{out}{err}").contains("refused: No such file or directory"),
        "{out}\n{err}"
    );
    // Each control's enforcement is logged at the sandboxed server's start, and an explicit off
    // is a warning; the server left unset logs neither.
    let log = std::fs::read_to_string(dir.join("serve.log")).unwrap();
    let controls: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("sandbox control"))
        .collect();
    assert!(
        controls.iter().all(|l| l.contains("boxed")) && controls.len() >= 11,
        "{log}"
    );
    for control in ["Namespaces", "Filesystem", "Network", "Seccomp", "Landlock"] {
        assert!(
            controls
                .iter()
                .any(|l| l.contains(control) && l.contains("Enforced")),
            "{control}: {log}"
        );
    }
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("sandbox profile is \"off\""))
        .collect();
    assert!(
        !warnings.is_empty()
            && warnings
                .iter()
                .all(|l| l.contains("loud") && l.contains("WARN")),
        "{log}"
    );
}
