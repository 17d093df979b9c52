//! Why: every other crate's tests trust the test kit to start real peers and to leave nothing behind;
//! these tests pin both promises against a real peer (server-everything) and a process tree.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::ffi::OsStr;
use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::time::Duration;

use manifold_testkit::{
    ChildGuard, TestkitError, free_port, listening_addrs, loopback_preload, node,
    npm_package_entry, process_group_members, process_is_running, spawn_http_peer,
};

/// Only stops a broken test from hanging; never a claim about speed.
const HANG_GUARD: Duration = Duration::from_secs(30);

#[tokio::test]
async fn server_everything_opens_its_port_on_loopback_only_and_dies_with_its_guard() {
    let port = free_port().unwrap();
    let entry = npm_package_entry("@modelcontextprotocol/server-everything").unwrap();
    assert!(
        entry.ends_with("dist/index.js"),
        "unexpected entry {}",
        entry.display()
    );
    let preload = loopback_preload().unwrap();

    let guard = spawn_http_peer(
        node().unwrap(),
        [
            OsStr::new("--require"),
            preload.as_os_str(),
            entry.as_os_str(),
            OsStr::new("streamableHttp"),
        ],
        [("PORT", port.to_string())],
        port,
    )
    .await
    .unwrap();
    let pid = guard.pid();
    assert!(process_is_running(pid));
    assert_eq!(
        listening_addrs(port).unwrap(),
        vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]
    );

    drop(guard);

    assert!(
        !process_is_running(pid),
        "server-everything (pid {pid}) survived its guard"
    );
    assert!(
        listening_addrs(port).unwrap().is_empty(),
        "port {port} still listening"
    );
    assert!(std::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err());
}

#[tokio::test]
async fn dropping_the_guard_kills_the_whole_process_group() {
    let mut command = Command::new("sh");
    command.args(["-c", "sleep 300 & sleep 300 & wait"]);
    let guard = ChildGuard::spawn(command).unwrap();
    let pgid = guard.pid();

    // The shell and both sleeps share the guard's group once the shell has forked them.
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    while process_group_members(pgid).len() < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "group {pgid} never reached 3 members"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    drop(guard);

    assert_eq!(process_group_members(pgid), Vec::<u32>::new());
}

#[tokio::test]
async fn explicit_kill_reports_death_by_sigkill() {
    use std::os::unix::process::ExitStatusExt;

    let mut command = Command::new("sleep");
    command.arg("300");
    let guard = ChildGuard::spawn(command).unwrap();
    let pid = guard.pid();
    let status = guard.kill().unwrap();
    assert_eq!(status.signal(), Some(9));
    assert!(!process_is_running(pid));
}

#[tokio::test]
async fn a_peer_that_exits_before_listening_is_reported_not_waited_for() {
    let port = free_port().unwrap();
    let err = spawn_http_peer("sh", ["-c", "exit 3"], [("UNUSED", "1")], port)
        .await
        .unwrap_err();
    match err {
        TestkitError::ExitedEarly {
            program,
            port: p,
            status,
        } => {
            assert_eq!(program, "sh");
            assert_eq!(p, port);
            assert_eq!(status.code(), Some(3));
        }
        other => panic!("expected ExitedEarly, got {other}"),
    }
}

#[tokio::test]
async fn a_program_that_does_not_exist_is_a_spawn_error() {
    let port = free_port().unwrap();
    let err = spawn_http_peer("/nonexistent/manifold-peer", [""; 0], [("A", "B")], port)
        .await
        .unwrap_err();
    assert!(matches!(err, TestkitError::Spawn { .. }), "{err}");
    assert!(
        err.to_string().contains("/nonexistent/manifold-peer"),
        "{err}"
    );
}
