//! Properties of sealed session ids, the decoder every legacy request's `Mcp-Session-Id` reaches:
//! an id opens to exactly what was sealed, and any other text (a damaged id, an id from another
//! key, arbitrary bytes) is refused without a panic.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use manifold_server::SessionKey;
use manifold_server::sealed::{OpenError, SessionState, now_secs, open, seal};
use manifold_wire::Revision;
use manifold_wire::id::json_string;
use proptest::prelude::*;

const DAY: Duration = Duration::from_secs(86_400);

fn key() -> impl Strategy<Value = SessionKey> {
    any::<[u8; 32]>().prop_map(|bytes| SessionKey::from_bytes(&bytes).unwrap())
}

/// Small states (they fit in an id whole, so nothing is reduced), of every revision.
fn state() -> impl Strategy<Value = SessionState> {
    (
        prop::sample::select(Revision::ALL.to_vec()),
        prop::collection::btree_map("\\PC{0,8}", any::<bool>(), 0..4),
        prop::option::of("\\PC{0,12}"),
        prop::option::of("[0-9a-f]{32}"),
        0u64..DAY.as_secs(),
    )
        .prop_map(|(revision, capabilities, name, owner, age)| {
            let members: Vec<String> = capabilities
                .iter()
                .map(|(k, v)| format!("{}:{{\"listChanged\":{v}}}", json_string(k)))
                .collect();
            SessionState {
                revision,
                capabilities: format!("{{{}}}", members.join(",")),
                info: name.map(|n| format!("{{\"name\":{},\"version\":\"1\"}}", json_string(&n))),
                created: now_secs() - age,
                owner,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn a_sealed_id_opens_to_what_was_sealed(key in key(), state in state()) {
        let id = seal(&key, &state).unwrap();
        prop_assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)), "{}", id);
        prop_assert_eq!(open(&key, &id, DAY), Ok(state));
    }

    #[test]
    fn any_single_bit_flip_is_refused(key in key(), state in state(), at in any::<prop::sample::Index>(), bit in 0u8..8) {
        let id = seal(&key, &state).unwrap();
        let mut bytes = id.into_bytes();
        let at = at.index(bytes.len());
        bytes[at] ^= 1 << bit;
        let flipped = String::from_utf8_lossy(&bytes);
        prop_assert!(open(&key, &flipped, DAY).is_err(), "{} opened", flipped);
    }

    #[test]
    fn a_truncated_or_extended_id_is_refused(
        key in key(), state in state(), cut in any::<prop::sample::Index>(), tail in "\\PC{1,8}",
    ) {
        let id = seal(&key, &state).unwrap();
        let cut = cut.index(id.len());
        prop_assert!(open(&key, &id[..cut], DAY).is_err(), "{} opened", &id[..cut]);
        let extended = format!("{id}{tail}");
        prop_assert!(open(&key, &extended, DAY).is_err(), "{} opened", extended);
    }

    #[test]
    fn an_id_sealed_under_another_key_is_refused(a in key(), b in key(), state in state()) {
        prop_assume!(a != b);
        let id = seal(&a, &state).unwrap();
        prop_assert_eq!(open(&b, &id, DAY), Err(OpenError::Forged));
    }

    #[test]
    fn an_id_older_than_its_lifetime_is_refused(key in key(), state in state(), lifetime in 0u64..1000) {
        let old = SessionState { created: now_secs() - lifetime - 2, ..state };
        let id = seal(&key, &old).unwrap();
        prop_assert_eq!(open(&key, &id, Duration::from_secs(lifetime)), Err(OpenError::Expired));
    }

    #[test]
    fn arbitrary_text_is_refused_without_a_panic(
        key in key(), text in "\\PC{0,120}", body in "[A-Za-z0-9_-]{0,120}",
    ) {
        prop_assert!(open(&key, &text, DAY).is_err());
        // Well-formed to the eye (the right key id, base64url), yet never sealed.
        let shaped = format!("{}.{body}", key.id());
        prop_assert!(open(&key, &shaped, DAY).is_err(), "{} opened", shaped);
    }
}
