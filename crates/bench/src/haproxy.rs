//! Why: the replicas scenario puts Manifold behind the load balancer an operator would run in
//! front of several replicas, and a fresh machine runs none of its own. The benchmark starts
//! HAProxy (Debian's, or `$MANIFOLD_HAPROXY`) as a child with a configuration it writes: one
//! frontend per set of backends, so one process serves every lane of the scenario and its CPU is
//! read from one pid.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::child_process::{ChildProcess, free_port};
use crate::client::Endpoint;

/// Overrides which HAProxy binary runs (the same variable the replica tests read).
pub const HAPROXY_ENV: &str = "MANIFOLD_HAPROXY";
/// Where Debian's haproxy package installs it.
const DEBIAN_HAPROXY: &str = "/usr/sbin/haproxy";
/// How long HAProxy may take to listen on every frontend.
const START_HANG_GUARD: Duration = Duration::from_secs(30);

/// One frontend and the backends it balances over.
pub struct Frontend {
    /// `[A-Za-z0-9_]`: the frontend's and backend's name in the configuration.
    pub name: String,
    /// `IP:PORT` of each backend.
    pub backends: Vec<String>,
}

/// A running HAProxy and the port of each frontend, in the order they were asked for.
pub struct Haproxy {
    process: ChildProcess,
    ports: Vec<u16>,
}

/// The HAProxy binary to run: `$MANIFOLD_HAPROXY`, else Debian's, else `haproxy` from PATH.
pub fn binary() -> PathBuf {
    if let Some(given) = std::env::var_os(HAPROXY_ENV) {
        return PathBuf::from(given);
    }
    let debian = Path::new(DEBIAN_HAPROXY);
    if debian.is_file() {
        return debian.to_path_buf();
    }
    PathBuf::from("haproxy")
}

/// The configuration: round robin per request over keep-alive connections, health checks of
/// Manifold's `/readyz`, and a refused connection retried on another backend.
///
/// Unlike the replica tests (`option httpclose`, every request a new connection, so a Python
/// client's consecutive requests surely land on different replicas) the client side is kept
/// alive: the benchmark's workers keep one connection each, as a busy client would, and a fresh
/// TCP connection per call would measure connection setup rather than the gateways. HAProxy
/// still chooses a backend for every request (no `prefer-last-server`); the scenario checks
/// that from each replica's own `/metrics`.
pub fn config(frontends: &[(&Frontend, u16)]) -> String {
    let mut text = String::from(
        "# Written by manifold-bench for one run.\n\
global\n    maxconn 4096\n\
defaults\n    mode http\n    timeout connect 5s\n    timeout client 120s\n    timeout server 120s\n    option redispatch\n    retries 3\n",
    );
    for (frontend, port) in frontends {
        let name = &frontend.name;
        text.push_str(&format!(
            "\nfrontend fe_{name}\n    bind 127.0.0.1:{port}\n    default_backend be_{name}\n\
\nbackend be_{name}\n    balance roundrobin\n    option httpchk\n    http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host 127.0.0.1\n    http-check expect status 200\n"
        ));
        for (index, backend) in frontend.backends.iter().enumerate() {
            text.push_str(&format!(
                "    server r{index} {backend} check inter 1s fall 2 rise 1\n"
            ));
        }
    }
    text
}

impl Haproxy {
    /// Writes `dir/haproxy.cfg` and starts HAProxy in the foreground on it; returns once every
    /// frontend accepts connections.
    pub async fn start(dir: &Path, frontends: &[Frontend]) -> Result<Haproxy, String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("could not create {}: {e}", dir.display()))?;
        let mut ports = Vec::with_capacity(frontends.len());
        for _ in frontends {
            ports.push(free_port()?);
        }
        let pairs: Vec<(&Frontend, u16)> = frontends.iter().zip(ports.iter().copied()).collect();
        let path = dir.join("haproxy.cfg");
        std::fs::write(&path, config(&pairs))
            .map_err(|e| format!("could not write {}: {e}", path.display()))?;
        let program = binary();
        let mut process = ChildProcess::spawn(
            "haproxy",
            &program,
            &[
                "-db".to_owned(),
                "-f".to_owned(),
                path.to_string_lossy().into_owned(),
            ],
            &[],
            &dir.join("haproxy.log"),
        )
        .map_err(|e| {
            format!("{e}; install HAProxy (Debian: apt-get install haproxy) or set ${HAPROXY_ENV}")
        })?;
        for port in &ports {
            process.wait_for_port(*port, START_HANG_GUARD).await?;
        }
        Ok(Haproxy { process, ports })
    }

    /// The MCP endpoint of frontend `index`.
    pub fn endpoint(&self, index: usize) -> Result<Endpoint, String> {
        let port = self
            .ports
            .get(index)
            .ok_or_else(|| format!("HAProxy has no frontend {index}"))?;
        Endpoint::parse(&format!("http://127.0.0.1:{port}/mcp")).map_err(|e| e.to_string())
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    pub async fn stop(self) {
        self.process.stop().await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn each_frontend_balances_over_its_own_backends_with_health_checks() {
        let one = Frontend {
            name: "one".to_owned(),
            backends: vec!["127.0.0.1:4001".to_owned()],
        };
        let three = Frontend {
            name: "three".to_owned(),
            backends: (1..=3).map(|i| format!("127.0.0.1:400{i}")).collect(),
        };
        let text = config(&[(&one, 5001), (&three, 5003)]);
        assert!(
            text.contains("frontend fe_one\n    bind 127.0.0.1:5001\n    default_backend be_one")
        );
        assert!(text.contains("frontend fe_three\n    bind 127.0.0.1:5003"));
        assert_eq!(text.matches("balance roundrobin").count(), 2);
        assert_eq!(text.matches(" check inter 1s").count(), 4);
        assert!(text.contains("    server r2 127.0.0.1:4003 check"));
        assert!(!text.contains("httpclose") && !text.contains("prefer-last-server"));
    }
}
