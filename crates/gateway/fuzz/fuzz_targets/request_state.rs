//! Fuzzes `HeldCalls::take`, which reads the `requestState` a modern client sends back on its
//! retry: attacker-controlled text that must name a held call only if Manifold issued it.
//!
//! One call is held (on a real upstream, the workspace's test peer over stdio) for the whole run.
//! Each input is taken as a state in its own right, and as edits to the real state: the real
//! state takes the call (which is then held again under a fresh state), a state issued before
//! and used is `Gone`, anything else is `Forged` and leaves the held call in place.
#![no_main]

use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use manifold_gateway::context::SilentPeer;
use manifold_gateway::mrtr::{HeldCall, HeldCalls, QuestionCatcher, StateError};
use manifold_upstream::transport::stdio::StdioSpec;
use manifold_upstream::{CallOptions, ConnectOptions, Connection, Target, connect};

/// Where the test peer is: `MANIFOLD_TEST_PEER`, else the shared target directory's debug build.
fn test_peer() -> String {
    std::env::var("MANIFOLD_TEST_PEER").unwrap_or_else(|_| {
        let home = std::env::var("HOME").unwrap_or_default();
        format!("{home}/.cache/manifold/target/debug/manifold-test-peer")
    })
}

struct Held {
    runtime: tokio::runtime::Runtime,
    _connection: Connection,
    calls: HeldCalls,
    state: Mutex<String>,
    /// Every state issued and since used (the fuzzer replays them: it sees them in comparisons).
    used: Mutex<Vec<String>>,
}

static HELD: LazyLock<Held> = LazyLock::new(|| {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let spec = StdioSpec {
        command: test_peer(),
        args: vec!["stdio".to_owned()],
        ..StdioSpec::default()
    };
    let (connection, call) = runtime.block_on(async {
        let (connection, _) = connect(&Target::Stdio(spec), &ConnectOptions::new("peer"))
            .await
            .expect("start the test peer (build it: cargo build -p manifold-test-peer)");
        let call = connection
            .request(
                "ping",
                None,
                CallOptions::with_timeout(Duration::from_secs(3600)),
            )
            .await
            .unwrap();
        (connection, call)
    });
    let calls = HeldCalls::new();
    let state = {
        let _inside = runtime.enter();
        calls.hold(held_call(call))
    };
    Held {
        runtime,
        _connection: connection,
        calls,
        state: Mutex::new(state),
        used: Mutex::new(Vec::new()),
    }
});

fn held_call(call: manifold_upstream::Call) -> HeldCall {
    let (answer, _) = tokio::sync::oneshot::channel();
    let (catcher, questions) = QuestionCatcher::new(Arc::new(SilentPeer));
    HeldCall::new("peer".to_owned(), call, answer, catcher, questions)
}

#[derive(Arbitrary, Debug)]
enum Edit {
    FlipBit { at: u16, bit: u8 },
    Truncate { to: u16 },
    Append { text: String },
    Insert { at: u16, byte: u8 },
}

#[derive(Arbitrary, Debug)]
struct Input {
    raw: String,
    edits: Vec<Edit>,
}

fn apply(state: &str, edits: &[Edit]) -> String {
    let mut bytes = state.as_bytes().to_vec();
    for edit in edits {
        match edit {
            Edit::FlipBit { at, bit } => {
                if !bytes.is_empty() {
                    let at = usize::from(*at) % bytes.len();
                    bytes[at] ^= 1 << (bit % 8);
                }
            }
            Edit::Truncate { to } => bytes.truncate(usize::from(*to)),
            Edit::Append { text } => bytes.extend_from_slice(text.as_bytes()),
            Edit::Insert { at, byte } => {
                let at = usize::from(*at).min(bytes.len());
                bytes.insert(at, *byte);
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Takes `candidate`: only the real state may succeed, and it is held again at once.
fn take(held: &Held, candidate: &str) {
    let mut state = held.state.lock().unwrap();
    match held.calls.take(candidate) {
        Ok(call) => {
            assert_eq!(
                candidate, *state,
                "a state Manifold never issued took a held call"
            );
            assert_eq!(call.server, "peer");
            let _inside = held.runtime.enter();
            held.used.lock().unwrap().push(state.clone());
            *state = held.calls.hold(call);
        }
        // The held call outlived HELD_CALL_TTL (runs are longer): gone, as it must be; hold another.
        Err(StateError::Gone) if candidate == *state => {
            let call = held
                .runtime
                .block_on(held._connection.request(
                    "ping",
                    None,
                    CallOptions::with_timeout(Duration::from_secs(3600)),
                ))
                .unwrap();
            let _inside = held.runtime.enter();
            held.used.lock().unwrap().push(state.clone());
            *state = held.calls.hold(held_call(call));
        }
        Err(StateError::Gone) => assert!(
            held.used.lock().unwrap().iter().any(|u| u == candidate),
            "{candidate:?} passed authentication but was never issued"
        ),
        Err(e) => {
            assert_ne!(candidate, *state, "the issued state was refused: {e}");
            assert_eq!(
                e,
                StateError::Forged,
                "{candidate:?} was not refused as forged"
            );
        }
    }
}

fuzz_target!(|input: Input| {
    let held = &*HELD;
    take(held, &input.raw);
    let edited = apply(&held.state.lock().unwrap(), &input.edits);
    take(held, &edited);
});
