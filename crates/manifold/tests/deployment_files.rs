//! Why: the deployment files (deploy/Dockerfile, deploy/kubernetes/manifold.yaml,
//! deploy/systemd/manifold.service) are copied by users as they are, so what they say of the binary
//! must be true of it: the configuration they ship passes `manifold check`, the ports they open are
//! the ones that configuration listens on, the probes ask paths the admin listener serves, and the
//! paths, flags and signals are the binary's. Nothing here runs Docker, Kubernetes or systemd.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use manifold_testkit::workspace_root;
use yaml_rust2::{Yaml, YamlLoader};

const MANIFOLD: &str = env!("CARGO_BIN_EXE_manifold");
const CONFIG_PATH: &str = "/etc/manifold/manifold.toml";

fn read(path: &str) -> String {
    std::fs::read_to_string(workspace_root().join(path)).unwrap()
}

fn manifests() -> Vec<Yaml> {
    YamlLoader::load_from_str(&read("deploy/kubernetes/manifold.yaml")).unwrap()
}

fn of_kind<'a>(docs: &'a [Yaml], kind: &str) -> &'a Yaml {
    docs.iter()
        .find(|d| d["kind"].as_str() == Some(kind))
        .unwrap_or_else(|| panic!("no {kind} in the manifests"))
}

fn strings(list: &Yaml) -> Vec<String> {
    list.as_vec()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

/// The port of an `IP:PORT` value in the shipped configuration.
fn port_of(toml: &toml_edit::DocumentMut, table: &str, key: &str) -> i64 {
    toml[table][key]
        .as_str()
        .and_then(|v| v.rsplit_once(':'))
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or_else(|| panic!("{table}.{key} has no port"))
}

/// The shipped configuration, and `manifold check`'s verdict on it with the Secret's values set.
fn shipped_config() -> (String, toml_edit::DocumentMut) {
    let docs = manifests();
    let text = of_kind(&docs, "ConfigMap")["data"]["manifold.toml"]
        .as_str()
        .unwrap()
        .to_owned();
    let parsed: toml_edit::DocumentMut = text.parse().unwrap();
    (text, parsed)
}

#[test]
fn the_shipped_configuration_passes_check_with_the_secrets_set() {
    let (text, _) = shipped_config();
    let dir = manifold_testkit::fresh_dir("deployment-config").unwrap();
    let file = dir.join("manifold.toml");
    // data_dir must be writable here; everything else is checked as shipped.
    std::fs::write(
        &file,
        text.replace("/var/lib/manifold", &dir.join("data").display().to_string()),
    )
    .unwrap();
    let out = Command::new(MANIFOLD)
        .args(["check", file.to_str().unwrap()])
        .env(
            "MANIFOLD_SESSION_KEY",
            "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
        )
        .env(
            "MANIFOLD_DATABASE_URL",
            "postgres://manifold:pw@127.0.0.1:5432/manifold",
        )
        .env("HOME", &dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_deployment_opens_the_configured_ports_probes_served_paths_and_runs_the_image_s_command() {
    let docs = manifests();
    let (text, config) = shipped_config();
    let listen = port_of(&config, "gateway", "listen");
    let admin = port_of(&config, "telemetry", "admin_listen");
    let deployment = of_kind(&docs, "Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let ports: Vec<(String, i64)> = container["ports"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_owned(),
                p["containerPort"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ports,
        [("mcp".to_owned(), listen), ("admin".to_owned(), admin)]
    );
    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
        assert_eq!(container[probe]["httpGet"]["path"].as_str(), Some(path));
        assert_eq!(
            container[probe]["httpGet"]["port"].as_str(),
            Some("admin"),
            "{probe} on the admin listener, which serves {path}"
        );
    }
    // The same command as the image's ENTRYPOINT.
    let mut command = strings(&container["command"]);
    command.extend(strings(&container["args"]));
    let dockerfile = read("deploy/Dockerfile");
    let entrypoint = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("ENTRYPOINT "))
        .unwrap();
    let entrypoint: Vec<String> = serde_json::from_str(entrypoint).unwrap();
    assert_eq!(command, entrypoint);
    assert_eq!(entrypoint[1..], ["serve", "--config", CONFIG_PATH]);
    // The ConfigMap is mounted where the command reads the file.
    let mount = container["volumeMounts"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|m| m["name"].as_str() == Some("config"))
        .unwrap();
    assert_eq!(
        format!("{}/manifold.toml", mount["mountPath"].as_str().unwrap()),
        CONFIG_PATH
    );
    // Every variable the configuration reads comes from the Secret, under a key the Secret has.
    let secret = of_kind(&docs, "Secret");
    for var in container["env"].as_vec().unwrap() {
        let name = var["name"].as_str().unwrap();
        assert!(
            text.contains(&format!("${{{name}}}")),
            "{name} is read by the configuration"
        );
        let key = var["valueFrom"]["secretKeyRef"]["key"].as_str().unwrap();
        assert!(
            !secret["stringData"][key].is_badvalue(),
            "the Secret has {key}"
        );
    }
    // The data dir is mounted, and the pod runs as the image's user.
    assert!(
        container["volumeMounts"]
            .as_vec()
            .unwrap()
            .iter()
            .any(|m| m["mountPath"].as_str() == config["gateway"]["data_dir"].as_str())
    );
    let user = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("USER "))
        .unwrap();
    assert_eq!(
        pod["securityContext"]["runAsUser"].as_i64(),
        user.trim().parse().ok()
    );
    // The Service reaches the MCP port; the budget leaves replicas to drain onto.
    let service = of_kind(&docs, "Service");
    assert_eq!(
        service["spec"]["ports"][0]["targetPort"].as_str(),
        Some("mcp")
    );
    let replicas = deployment["spec"]["replicas"].as_i64().unwrap();
    let min = of_kind(&docs, "PodDisruptionBudget")["spec"]["minAvailable"]
        .as_i64()
        .unwrap();
    assert!(
        min < replicas && min >= 1,
        "minAvailable {min} of {replicas}"
    );
    // The image opens both ports and ships the sandbox launcher beside the binary.
    let exposed = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("EXPOSE "))
        .unwrap();
    assert_eq!(
        exposed.split_whitespace().collect::<Vec<_>>(),
        [listen.to_string(), admin.to_string()]
    );
    assert!(dockerfile.contains("manifold-sandbox-exec /usr/local/bin/"));
}

#[test]
fn the_command_line_in_every_file_is_one_the_binary_accepts() {
    let help = Command::new(MANIFOLD)
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    assert!(help.contains("--config"), "{help}");
    let global = Command::new(MANIFOLD).arg("--help").output().unwrap();
    assert!(String::from_utf8_lossy(&global.stdout).contains("-v, --verbose"));
    let unit = read("deploy/systemd/manifold.service");
    let line = |key: &str| {
        unit.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("no {key}= in the unit"))
            .to_owned()
    };
    assert_eq!(
        line("ExecStart"),
        format!("/usr/local/bin/manifold -v serve --config {CONFIG_PATH}")
    );
    // SIGHUP reloads and SIGTERM drains (docs/operations.md, "Signals").
    assert_eq!(line("ExecReload"), "/bin/kill -HUP $MAINPID");
    assert_eq!(line("KillSignal"), "SIGTERM");
    assert_eq!(line("KillMode"), "mixed");
    assert_eq!(line("Delegate"), "yes");
    let dockerfile = read("deploy/Dockerfile");
    assert!(dockerfile.contains("STOPSIGNAL SIGTERM"));
    // A parse of each command line by the binary itself: an unknown flag would exit 2.
    for args in [
        vec![
            "-v",
            "serve",
            "--config",
            "/nonexistent/manifold.toml",
            "--help",
        ],
        vec!["serve", "--config", CONFIG_PATH, "--help"],
    ] {
        let out = Command::new(MANIFOLD).args(&args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probed_paths_answer_on_the_admin_listener() {
    let (text, _) = shipped_config();
    let dir = manifold_testkit::fresh_dir("deployment-probes").unwrap();
    let admin = manifold_testkit::free_port().unwrap();
    // The shipped file on loopback ports, with its own data dir and without PostgreSQL or the
    // example server: the probes, not the store, are under test.
    let store = text.find("[store]").unwrap();
    let telemetry = text.find("[telemetry]").unwrap();
    let servers = text.find("[servers.time]").unwrap();
    let local = format!("{}{}", &text[..store], &text[telemetry..servers])
        .replace("0.0.0.0:7391", "127.0.0.1:0")
        .replace("0.0.0.0:9464", &format!("127.0.0.1:{admin}"))
        .replace("/var/lib/manifold", &dir.join("data").display().to_string());
    let file = dir.join("manifold.toml");
    std::fs::write(&file, local).unwrap();
    let gateway = manifold_testkit::ServeCommand::new(MANIFOLD, &dir)
        .config(&file)
        .env(
            "MANIFOLD_SESSION_KEY",
            "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
        )
        .env("HOME", &dir)
        .start()
        .unwrap();
    let http = manifold_testkit::http_client();
    for path in ["/healthz", "/readyz"] {
        let status = http
            .get(format!("http://127.0.0.1:{admin}{path}"))
            .send()
            .await
            .unwrap()
            .status();
        assert!(status == 200 || status == 503, "{path}: {status}");
    }
    drop(gateway);
}
