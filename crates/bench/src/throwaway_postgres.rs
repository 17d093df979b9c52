//! Why: the audit scenario measures the trail on PostgreSQL too, and a fresh machine runs none.
//! The benchmark starts its own, the way `manifold_testkit::Postgres` does for the store's tests
//! (`initdb` into the run's work directory, a free loopback port, trust authentication, as the
//! `postgres` account when we run as root), but here rather than through that crate: the testkit
//! is a dev-dependency only, and this tool links no workspace crate. Unlike the tests' server it
//! keeps PostgreSQL's durability defaults (fsync on), so its commits cost what a user's would.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::child_process::free_port;

/// Overrides where `initdb` and `pg_ctl` are looked for (the same variable the tests read).
pub const POSTGRES_BIN_ENV: &str = "MANIFOLD_POSTGRES_BIN";
/// The account PostgreSQL runs as when the benchmark runs as root (it refuses to run as root).
const POSTGRES_OS_USER: &str = "postgres";
/// Where Debian installs the server binaries, one directory per major version.
const DEBIAN_POSTGRES_ROOT: &str = "/usr/lib/postgresql";

/// Why the throwaway server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum PostgresError {
    #[error(
        "PostgreSQL's initdb and pg_ctl were not found (looked in ${POSTGRES_BIN_ENV}, {DEBIAN_POSTGRES_ROOT}/*/bin and PATH); install the server (Debian: apt-get install postgresql) or set {POSTGRES_BIN_ENV} to the directory holding them"
    )]
    NotInstalled,
    #[error(
        "PostgreSQL refuses to run as root and there is no `{POSTGRES_OS_USER}` account to run it as; create one (Debian's postgresql package does) or run the benchmark as another user"
    )]
    NoAccount,
    #[error("could not prepare {path} for PostgreSQL: {source}")]
    Directory {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("PostgreSQL's {step} failed: {detail}")]
    Step { step: &'static str, detail: String },
}

/// A running throwaway PostgreSQL server; stopped when dropped (its files go with the work
/// directory).
pub struct ThrowawayPostgres {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    run_as_postgres: bool,
    stopped: bool,
}

impl ThrowawayPostgres {
    /// `initdb` into `dir/data`, then `pg_ctl start -w` on a free 127.0.0.1 port. Blocking (a
    /// few seconds): call it from a blocking task.
    pub fn start(dir: &Path) -> Result<ThrowawayPostgres, PostgresError> {
        let bin = postgres_bin().ok_or(PostgresError::NotInstalled)?;
        let run_as = if is_root() {
            Some(os_user_ids(POSTGRES_OS_USER).ok_or(PostgresError::NoAccount)?)
        } else {
            None
        };
        let directory = |source| PostgresError::Directory {
            path: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(directory)?;
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(dir, Some(uid), Some(gid)).map_err(directory)?;
        }
        let port = free_port().map_err(|detail| PostgresError::Step {
            step: "port choice",
            detail,
        })?;
        let mut server = ThrowawayPostgres {
            bin,
            data: dir.join("data"),
            port,
            run_as_postgres: run_as.is_some(),
            // Nothing to stop until pg_ctl start succeeded.
            stopped: true,
        };
        let data = server.data.display().to_string();
        server.run(
            "initdb",
            "initdb",
            &[
                "-D",
                &data,
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        )?;
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1",
            dir.display()
        );
        let log = dir.join("postgres.log").display().to_string();
        server.run(
            "start",
            "pg_ctl",
            &["start", "-D", &data, "-w", "-l", &log, "-o", &options],
        )?;
        server.stopped = false;
        Ok(server)
    }

    /// The URL Manifold's `[store] url` takes (trust authentication: no password).
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// What `postgres --version` says (for the report), or that it could not tell.
    pub fn version(&self) -> String {
        Command::new(self.bin.join("postgres"))
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .output()
            .ok()
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| format!("PostgreSQL from {}", self.bin.display()))
    }

    /// The postmaster's process id, from `postmaster.pid`: its process tree is the store's CPU.
    pub fn postmaster_pid(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.data.join("postmaster.pid")).ok()?;
        text.lines().next()?.trim().parse().ok()
    }

    fn run(&self, step: &'static str, tool: &str, args: &[&str]) -> Result<(), PostgresError> {
        let program = self.bin.join(tool);
        let mut command = if self.run_as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", POSTGRES_OS_USER, "--"]).arg(&program);
            c
        } else {
            Command::new(&program)
        };
        let out = command
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| PostgresError::Step {
                step,
                detail: format!("could not run {}: {e}", program.display()),
            })?;
        if out.status.success() {
            return Ok(());
        }
        Err(PostgresError::Step {
            step,
            detail: format!(
                "{} exited with {}: {}{}",
                program.display(),
                out.status,
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        })
    }

    /// Stops the server at once (its data is thrown away with the work directory). Blocking.
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        let data = self.data.display().to_string();
        let _ = self.run(
            "stop",
            "pg_ctl",
            &["stop", "-D", &data, "-m", "immediate", "-w"],
        );
    }
}

impl Drop for ThrowawayPostgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The directory holding `initdb` and `pg_ctl`: `$MANIFOLD_POSTGRES_BIN`, else the newest
/// Debian version, else PATH.
fn postgres_bin() -> Option<PathBuf> {
    let has_tools = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Some(dir) = std::env::var_os(POSTGRES_BIN_ENV).map(PathBuf::from) {
        return has_tools(&dir).then_some(dir);
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir(DEBIAN_POSTGRES_ROOT)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("bin"))
        .filter(|dir| has_tools(dir))
        .collect();
    versions.sort();
    if let Some(newest) = versions.pop() {
        return Some(newest);
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .find(|dir| has_tools(dir))
}

/// Whether this process runs as root (the owner of `/proc/self` is the effective user).
fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// The uid and gid of account `name`, from /etc/passwd.
fn os_user_ids(name: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd_ids(&passwd, name)
}

fn passwd_ids(passwd: &str, name: &str) -> Option<(u32, u32)> {
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        match fields.as_slice() {
            [user, _, uid, gid, ..] if *user == name => {
                Some((uid.parse().ok()?, gid.parse().ok()?))
            }
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn the_postgres_account_is_found_by_its_exact_name() {
        let passwd = "root:x:0:0::/root:/bin/sh\npostgresql:x:7:7::/:/bin/sh\npostgres:x:101:104::/var/lib/postgresql:/bin/bash\n";
        assert_eq!(passwd_ids(passwd, "postgres"), Some((101, 104)));
        assert_eq!(
            passwd_ids("postgresql:x:7:7::/:/bin/sh\n", "postgres"),
            None
        );
    }
}
