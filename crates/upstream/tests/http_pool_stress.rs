//! Why: in about 1 of 40 chaos runs one call hung inside the HTTP client's pooled `send` and
//! settled only at its call deadline. This drives the shared HTTP client through what the chaos
//! test does to an HTTP upstream (SIGKILL and a restart on the same port, SIGSTOP and SIGCONT)
//! round after round, with calls in flight, and requires that every call sent while the peer is
//! running and not frozen gets an answer or an error other than the call deadline. The hang
//! itself was hyper 1.12's, fixed in 1.13.0; the chaos scene that reproduces it is
//! `manifold/tests/chaos.rs::calls_racing_a_restart_of_a_modern_http_upstream_are_answered`
//! (docs/operations.md, item 5 of the chaos findings).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use manifold_testkit::{ChildGuard, free_port, spawn_http_peer, test_peer};
use manifold_upstream::{
    CallOptions, ConnectOptions, Connection, HttpSpec, HttpTransportChoice, Target, UpstreamError,
    connect,
};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Rounds of chaos; bounded so the test ends, large enough to meet a rare race.
const ROUNDS: usize = 40;
/// Calls sent at once in each round.
const CALLS_PER_ROUND: usize = 8;
/// Calls started and cancelled in each round, besides those that must be answered.
const CANCELLED_PER_ROUND: usize = 4;
/// A call's deadline: a call that reaches it against a running peer is the hang.
const CALL_DEADLINE: Duration = Duration::from_secs(20);
/// How long the peer stays frozen: far below the call deadline, so frozen calls are answered.
const FROZEN_FOR: Duration = Duration::from_millis(300);

async fn start_peer(port: u16, era: &str) -> ChildGuard {
    let port_text = port.to_string();
    spawn_http_peer(
        test_peer().unwrap(),
        ["http", "--port", &port_text, "--era", era],
        Vec::<(String, String)>::new(),
        port,
    )
    .await
    .unwrap()
}

async fn open(port: u16) -> Connection {
    let target = Target::Http(HttpSpec {
        url: format!("http://127.0.0.1:{port}/mcp"),
        transport: HttpTransportChoice::StreamableHttp,
        ..HttpSpec::default()
    });
    connect(&target, &ConnectOptions::new("stressed"))
        .await
        .unwrap()
        .0
}

/// What a round's calls came to.
#[derive(Debug, Default)]
struct Tally {
    answered: usize,
    failed: usize,
    /// The calls that reached their deadline: the hang.
    hung: Vec<String>,
}

/// Sends a round of calls at once while `meanwhile` happens to the peer (a killed peer fails its
/// calls at once, a frozen one answers them once resumed: neither makes them wait for their
/// deadline).
async fn round(conn: &Connection, round: usize, meanwhile: Meanwhile, tally: &mut Tally) {
    let calls = (0..CALLS_PER_ROUND).map(|i| async move {
        let params = format!(r#"{{"name":"echo","arguments":{{"message":"r{round}c{i}"}}}}"#);
        conn.call(
            "tools/call",
            Some(&params),
            CallOptions::with_timeout(CALL_DEADLINE),
        )
        .await
    });
    let disruption = async move {
        // Rounds disrupt at different moments: before, while and after the calls go out.
        let delay = u64::try_from(round % 7).unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        match meanwhile {
            Meanwhile::Nothing => {}
            Meanwhile::Kill(peer) => {
                let _ = peer.kill();
            }
            Meanwhile::Freeze(pid) => {
                signal(pid, Signal::SIGSTOP);
                tokio::time::sleep(FROZEN_FOR).await;
                signal(pid, Signal::SIGCONT);
            }
        }
    };
    // Calls cancelled mid-flight, as clients do: their streams are dropped, or the server told.
    let cancelled = (0..CANCELLED_PER_ROUND).map(|i| async move {
        let params = format!(r#"{{"name":"echo","arguments":{{"message":"r{round}x{i}"}}}}"#);
        let options = CallOptions::with_timeout(CALL_DEADLINE);
        if let Ok(call) = conn.request("tools/call", Some(&params), options).await {
            tokio::time::sleep(Duration::from_millis(u64::try_from(i).unwrap_or(0))).await;
            let _ = call.cancel("the stress test moved on");
        }
    });
    let (results, (), _) = tokio::join!(
        futures::future::join_all(calls),
        disruption,
        futures::future::join_all(cancelled)
    );
    for r in results {
        match r {
            Ok(_) => tally.answered += 1,
            Err(e @ UpstreamError::Timeout { .. }) => {
                tally.hung.push(format!("round {round}: {e}"))
            }
            Err(_) => tally.failed += 1,
        }
    }
}

/// What happens to the peer while a round's calls are in flight.
enum Meanwhile {
    Nothing,
    /// SIGKILL (the round's calls may fail, at once).
    Kill(ChildGuard),
    /// SIGSTOP for [`FROZEN_FOR`], then SIGCONT: the calls wait and are answered.
    Freeze(u32),
}

fn signal(pid: u32, signal: Signal) {
    let _ = kill(Pid::from_raw(i32::try_from(pid).unwrap()), signal);
}

async fn stress(era: &str) {
    let port = free_port().unwrap();
    let mut peer = Some(start_peer(port, era).await);
    let conn = open(port).await;
    let mut tally = Tally::default();
    for r in 0..ROUNDS {
        match r % 4 {
            0 => {
                round(&conn, r, Meanwhile::Kill(peer.take().unwrap()), &mut tally).await;
                peer = Some(start_peer(port, era).await);
            }
            1 => {
                round(&conn, r, Meanwhile::Nothing, &mut tally).await;
                let pid = peer.as_ref().unwrap().pid();
                signal(pid, Signal::SIGSTOP);
                tokio::time::sleep(FROZEN_FOR).await;
                signal(pid, Signal::SIGCONT);
            }
            2 => {
                let pid = peer.as_ref().unwrap().pid();
                round(&conn, r, Meanwhile::Freeze(pid), &mut tally).await;
            }
            _ => round(&conn, r, Meanwhile::Nothing, &mut tally).await,
        }
    }
    eprintln!("{era}: {tally:?}");
    assert!(tally.answered > 0, "no call was ever answered: {tally:?}");
    assert!(
        tally.hung.is_empty(),
        "calls to a running peer hung until their deadline: {tally:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_to_a_legacy_http_peer_that_is_killed_restarted_and_frozen_never_hang() {
    stress("legacy").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_to_a_modern_http_peer_that_is_killed_restarted_and_frozen_never_hang() {
    stress("modern").await;
}
