//! Fuzzes `sealed::open`, which reads the `Mcp-Session-Id` of every legacy request: text anyone
//! can send, which must open only if this gateway sealed it under the key in use.
//!
//! Each input seals a state of its own choosing, then opens arbitrary text and the sealed id after
//! arbitrary edits: the real id opens to exactly what was sealed, any other text is refused (and
//! nothing panics), and the id never opens under another key.
#![no_main]

use std::time::Duration;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use manifold_server::SessionKey;
use manifold_server::sealed::{OpenError, SessionState, now_secs, open, seal};
use manifold_wire::Revision;

const DAY: Duration = Duration::from_secs(86_400);

#[derive(Arbitrary, Debug)]
enum Edit {
    FlipBit { at: u16, bit: u8 },
    Truncate { to: u16 },
    Append { text: String },
    Insert { at: u16, byte: u8 },
}

#[derive(Arbitrary, Debug)]
struct Input {
    key: [u8; 32],
    other_key: [u8; 32],
    revision: u8,
    capability: String,
    owner: Option<String>,
    raw: String,
    edits: Vec<Edit>,
}

fn apply(id: &str, edits: &[Edit]) -> String {
    let mut bytes = id.as_bytes().to_vec();
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

fuzz_target!(|input: Input| {
    let key = SessionKey::from_bytes(&input.key).unwrap();
    let revisions = Revision::ALL;
    let state = SessionState {
        revision: revisions[usize::from(input.revision) % revisions.len()],
        capabilities: format!(
            "{{{}:{{}}}}",
            manifold_wire::id::json_string(&input.capability)
        ),
        info: None,
        created: now_secs(),
        owner: input.owner,
    };
    let id = seal(&key, &state).unwrap();
    assert_eq!(open(&key, &id, DAY).as_ref(), Ok(&state));
    if input.other_key != input.key {
        let other = SessionKey::from_bytes(&input.other_key).unwrap();
        assert_eq!(open(&other, &id, DAY), Err(OpenError::Forged));
    }
    if input.raw != id {
        assert!(
            open(&key, &input.raw, DAY).is_err(),
            "{:?} opened",
            input.raw
        );
    }
    let edited = apply(&id, &input.edits);
    if edited != id {
        assert!(
            open(&key, &edited, DAY).is_err(),
            "{edited:?} (edited {id:?}) opened"
        );
    }
});
