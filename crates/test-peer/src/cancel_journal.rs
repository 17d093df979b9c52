//! Why: a test that abandons a call somewhere in front of this peer (a client that hangs up on a
//! gateway, a gateway that times out) must be able to ask the peer afterwards whether the
//! cancellation arrived here and whether anything is still running. stderr lines say so too, but a
//! peer behind a gateway has its stderr in someone else's log; the `journal` tool answers through
//! the same gateway instead.
//!
//! Only the `cancel-journal` behaviour keeps and offers the journal, so every other behaviour's
//! tool list stays exactly as the README states it.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde_json::{Map, Value, json};

use crate::behaviour::{Behaviour, Settings};
use crate::canonical_json;
use crate::engine::{self, Reply};
use crate::poison_free::lock;

/// The tool that reports the journal.
pub const TOOL: &str = "journal";

/// Most tags kept in each settled list; the oldest go first. A peer serving a long chaos run
/// must not grow without bound any more than the gateway in front of it.
pub const MAX_SETTLED_TAGS: usize = 10_000;

/// Tagged `slow` calls, process-wide: one peer process may serve many connections (HTTP
/// sessions, modern requests), and the test asks about all of them at once.
struct Journal {
    running: Vec<String>,
    cancelled: VecDeque<String>,
    finished: VecDeque<String>,
    abandoned: VecDeque<String>,
}

static JOURNAL: Mutex<Journal> = Mutex::new(Journal {
    running: Vec::new(),
    cancelled: VecDeque::new(),
    finished: VecDeque::new(),
    abandoned: VecDeque::new(),
});

/// Whether this peer keeps a journal at all.
pub fn enabled(settings: &Settings) -> bool {
    settings.behaviour == Behaviour::CancelJournal
}

/// The `journal` tool's definition, listed after the normal tools.
pub fn tool_definition() -> Value {
    json!({
        "name": TOOL,
        "description": "Reports the slow calls that carried a tag: which are still running, which were cancelled, which finished.",
        "inputSchema": {"type": "object", "properties": {}}
    })
}

/// One tagged `slow` call on its way through the journal. Dropped without being settled (the
/// serving task itself was torn down), it is recorded as abandoned.
pub struct Entry {
    tag: Option<String>,
}

/// Records the start of a `slow` call whose arguments carry a string `tag` (when journaling).
pub fn start(settings: &Settings, args: &Map<String, Value>) -> Entry {
    let tag = enabled(settings)
        .then(|| args.get("tag").and_then(Value::as_str).map(str::to_owned))
        .flatten();
    if let Some(tag) = &tag {
        lock(&JOURNAL).running.push(tag.clone());
    }
    Entry { tag }
}

impl Entry {
    /// The call was cancelled before it finished.
    pub fn cancelled(mut self) {
        self.settle(|journal| &mut journal.cancelled);
    }

    /// The call ran to its end; returns its answer `text`, naming the tag when there is one, so
    /// a client can tell which of its calls an answer belongs to.
    pub fn finished(mut self, text: String) -> String {
        let answer = match &self.tag {
            Some(tag) => format!("{text}, tag {tag}"),
            None => text,
        };
        self.settle(|journal| &mut journal.finished);
        answer
    }

    fn settle(&mut self, list: impl FnOnce(&mut Journal) -> &mut VecDeque<String>) {
        let Some(tag) = self.tag.take() else {
            return;
        };
        let mut journal = lock(&JOURNAL);
        if let Some(at) = journal.running.iter().position(|t| *t == tag) {
            journal.running.swap_remove(at);
        }
        let list = list(&mut journal);
        if list.len() >= MAX_SETTLED_TAGS {
            list.pop_front();
        }
        list.push_back(tag);
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.settle(|journal| &mut journal.abandoned);
    }
}

/// The `journal` tool: `{"running":[..],"cancelled":[..],"finished":[..],"abandoned":[..]}` as
/// `structuredContent` and, canonically serialised, as the text. `running` is sorted; the settled
/// lists are in the order the calls settled.
pub fn report() -> Reply {
    let journal = lock(&JOURNAL);
    let mut running = journal.running.clone();
    running.sort();
    let structured = json!({
        "running": running,
        "cancelled": journal.cancelled,
        "finished": journal.finished,
        "abandoned": journal.abandoned,
    });
    drop(journal);
    engine::into_reply(json!({
        "content": [{"type": "text", "text": canonical_json::to_string(&structured)}],
        "structuredContent": structured,
        "isError": false,
    }))
}
