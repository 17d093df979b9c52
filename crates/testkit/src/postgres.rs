//! Why: the store's PostgreSQL backend is tested against a real server, and a fresh machine runs
//! none. This starts a throwaway one from Debian's PostgreSQL package (installed by
//! scripts/install-peers): `initdb` into a scratch directory, a free loopback port, trust
//! authentication, stopped and removed on drop. PostgreSQL refuses to run as root, so as root the
//! server runs as the package's `postgres` user.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::ports::free_port;
use crate::scratch::ScratchDir;

/// Overrides where `initdb` and `pg_ctl` are looked for.
pub const POSTGRES_BIN_ENV: &str = "MANIFOLD_POSTGRES_BIN";
/// The account PostgreSQL runs as when the tests run as root.
pub const POSTGRES_OS_USER: &str = "postgres";
/// Where Debian installs the server binaries, one directory per major version.
const DEBIAN_POSTGRES_ROOT: &str = "/usr/lib/postgresql";

/// Why the throwaway server could not be started or controlled.
#[derive(Debug, thiserror::Error)]
pub enum PostgresFixtureError {
    #[error(
        "PostgreSQL's initdb/pg_ctl were not found (looked in ${POSTGRES_BIN_ENV}, PATH and {DEBIAN_POSTGRES_ROOT}/*/bin); run scripts/install-peers, which installs Debian's postgresql package"
    )]
    NotInstalled,
    #[error("{step} failed: {detail}")]
    Step { step: String, detail: String },
}

/// A running throwaway PostgreSQL server; dropped, it is stopped and its files removed.
pub struct Postgres {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    run_as: Option<(u32, u32)>,
    _scratch: ScratchDir,
}

impl Postgres {
    /// `initdb` + `pg_ctl start -w` on a free 127.0.0.1 port.
    pub fn start() -> Result<Postgres, PostgresFixtureError> {
        let bin = postgres_bin().ok_or(PostgresFixtureError::NotInstalled)?;
        let step = |step: &str, detail: String| PostgresFixtureError::Step {
            step: step.to_owned(),
            detail,
        };
        let scratch =
            ScratchDir::new("postgres").map_err(|e| step("scratch dir", e.to_string()))?;
        let run_as = if is_root() {
            os_user_ids(POSTGRES_OS_USER)
        } else {
            None
        };
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(scratch.path(), Some(uid), Some(gid))
                .map_err(|e| step("chown scratch dir", e.to_string()))?;
        }
        let port = free_port().map_err(|e| step("free port", e.to_string()))?;
        let fixture = Postgres {
            data: scratch.path().join("data"),
            bin,
            port,
            run_as,
            _scratch: scratch,
        };
        let data = fixture.data.display().to_string();
        fixture.run(
            "initdb",
            &[
                "-D",
                &data,
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        )?;
        fixture.start_again()?;
        Ok(fixture)
    }

    /// A URL for database `postgres` as user `postgres` with `password` (trust ignores it).
    pub fn url_with_password(&self, password: &str) -> String {
        format!(
            "postgres://postgres:{password}@127.0.0.1:{}/postgres",
            self.port
        )
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's data directory (inside a scratch directory removed on drop).
    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// Stops the server (fast shutdown: committed data stays).
    pub fn stop(&self) -> Result<(), PostgresFixtureError> {
        let data = self.data.display().to_string();
        self.run("pg_ctl stop", &["stop", "-D", &data, "-m", "fast", "-w"])
    }

    /// Starts the (stopped) server again on the same port.
    pub fn start_again(&self) -> Result<(), PostgresFixtureError> {
        let data = self.data.display().to_string();
        let socket_dir = self
            .data
            .parent()
            .unwrap_or(Path::new("/tmp"))
            .display()
            .to_string();
        let log = self
            .data
            .with_file_name("postgres.log")
            .display()
            .to_string();
        let options = format!(
            "-p {} -k {socket_dir} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port
        );
        self.run(
            "pg_ctl start",
            &["start", "-D", &data, "-w", "-l", &log, "-o", &options],
        )
    }

    fn run(&self, step: &str, args: &[&str]) -> Result<(), PostgresFixtureError> {
        let tool = if step == "initdb" { "initdb" } else { "pg_ctl" };
        let program = self.bin.join(tool);
        let mut command = match self.run_as {
            Some(_) => {
                let mut c = Command::new("runuser");
                c.args(["-u", POSTGRES_OS_USER, "--"]).arg(&program);
                c
            }
            None => Command::new(&program),
        };
        let out = command
            .args(args)
            .output()
            .map_err(|e| PostgresFixtureError::Step {
                step: step.to_owned(),
                detail: format!("could not run {}: {e}", program.display()),
            })?;
        if out.status.success() {
            return Ok(());
        }
        Err(PostgresFixtureError::Step {
            step: step.to_owned(),
            detail: format!(
                "{}: {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        })
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.data.display().to_string();
        let _ = self.run(
            "pg_ctl stop",
            &["stop", "-D", &data, "-m", "immediate", "-w"],
        );
    }
}

/// The directory holding `initdb` and `pg_ctl`.
pub fn postgres_bin() -> Option<PathBuf> {
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

/// Whether this process runs as root (then PostgreSQL must run as another user).
pub fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

fn os_user_ids(name: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
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
