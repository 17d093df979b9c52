//! Properties of the sealed `requestState` a modern client sends back to resume a held call
//! (`HeldCalls::hold` / `take`): attacker-controlled text that must name a held call only when
//! this gateway issued it, and only once. The held calls are real calls on the workspace's test
//! peer over stdio.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use manifold_gateway::context::SilentPeer;
use manifold_gateway::mrtr::{HeldCall, HeldCalls, QuestionCatcher, StateError};
use manifold_upstream::transport::stdio::StdioSpec;
use manifold_upstream::{CallOptions, ConnectOptions, Connection, Target, connect};
use proptest::prelude::*;

struct Peer {
    runtime: tokio::runtime::Runtime,
    connection: Connection,
}

static PEER: LazyLock<Peer> = LazyLock::new(|| {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let spec = StdioSpec {
        command: manifold_testkit::test_peer().unwrap().display().to_string(),
        args: vec!["stdio".to_owned()],
        ..StdioSpec::default()
    };
    let (connection, _) = runtime
        .block_on(connect(&Target::Stdio(spec), &ConnectOptions::new("peer")))
        .unwrap();
    Peer {
        runtime,
        connection,
    }
});

/// A call on the test peer, held as the router holds one while its client answers a question.
fn held_call(server: &str) -> HeldCall {
    let peer = &*PEER;
    let call = peer
        .runtime
        .block_on(peer.connection.request(
            "ping",
            None,
            CallOptions::with_timeout(Duration::from_secs(600)),
        ))
        .unwrap();
    let (answer, _) = tokio::sync::oneshot::channel();
    let (catcher, questions) = QuestionCatcher::new(Arc::new(SilentPeer));
    HeldCall::new(server.to_owned(), call, answer, catcher, questions)
}

fn hold(calls: &HeldCalls, server: &str) -> String {
    let held = held_call(server);
    let _inside = PEER.runtime.enter();
    calls.hold(held)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_state_takes_its_own_call_once(servers in prop::collection::vec("[a-z]{1,8}", 1..4)) {
        let calls = HeldCalls::new();
        let states: Vec<String> = servers.iter().map(|s| hold(&calls, s)).collect();
        for (state, server) in states.iter().zip(&servers) {
            prop_assert!(state.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
            prop_assert_eq!(&calls.take(state).unwrap().server, server);
        }
        for state in &states {
            prop_assert_eq!(calls.take(state).err(), Some(StateError::Gone));
        }
    }

    /// A refused state must not cost the real one its call either.
    #[test]
    fn any_single_bit_flip_is_forged_and_leaves_the_call_held(
        at in any::<prop::sample::Index>(), bit in 0u8..8,
    ) {
        let calls = HeldCalls::new();
        let state = hold(&calls, "peer");
        let mut bytes = state.clone().into_bytes();
        let at = at.index(bytes.len());
        bytes[at] ^= 1 << bit;
        let flipped = String::from_utf8_lossy(&bytes);
        prop_assert_eq!(calls.take(&flipped).err(), Some(StateError::Forged), "{}", flipped);
        prop_assert!(calls.take(&state).is_ok());
    }

    #[test]
    fn a_truncated_or_extended_state_is_forged(
        cut in any::<prop::sample::Index>(), tail in "[A-Za-z0-9_=-]{1,8}",
    ) {
        let calls = HeldCalls::new();
        let state = hold(&calls, "peer");
        let cut = cut.index(state.len());
        prop_assert_eq!(calls.take(&state[..cut]).err(), Some(StateError::Forged));
        let extended = format!("{state}{tail}");
        prop_assert_eq!(calls.take(&extended).err(), Some(StateError::Forged), "{}", extended);
        prop_assert!(calls.take(&state).is_ok());
    }

    #[test]
    fn a_state_from_another_gateway_is_forged(_case in 0u8..4) {
        let ours = HeldCalls::new();
        let theirs = HeldCalls::new();
        let state = hold(&theirs, "peer");
        prop_assert_eq!(ours.take(&state).err(), Some(StateError::Forged));
        prop_assert!(theirs.take(&state).is_ok());
    }

    #[test]
    fn arbitrary_text_is_forged_without_a_panic(
        text in "\\PC{0,96}", shaped in "[A-Za-z0-9_-]{0,96}",
    ) {
        let calls = HeldCalls::new();
        let state = hold(&calls, "peer");
        for candidate in [text.as_str(), shaped.as_str()] {
            prop_assume!(candidate != state);
            prop_assert_eq!(calls.take(candidate).err(), Some(StateError::Forged), "{}", candidate);
        }
        prop_assert!(calls.take(&state).is_ok());
    }
}
