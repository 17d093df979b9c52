//! What a test can ask the peer to do: the named behaviours and the knobs that tune them.
//!
//! Every variant here is documented, byte for byte, in the crate README; the integration tests
//! check the README's claims. Names are the kebab-case spelling clap derives (`garbage-lines`).

use clap::ValueEnum;

/// The behaviour selected with `--behaviour`. `Normal` is a correct dual-era MCP server; every
/// other variant breaks one thing on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Behaviour {
    /// A correct MCP server (both eras unless `--era` narrows it).
    Normal,
    /// stdio: two non-JSON lines before every response.
    GarbageLines,
    /// stdio: `--count` (default 3) non-JSON lines on stdout before reading anything.
    Banner,
    /// stdio: on `tools/call`, the first half of the response without a newline, then exit 0.
    PartialThenEof,
    /// Before each `tools/call` response, one notification line of exactly 20 MiB.
    OverLongLine,
    /// The `tools/list` answer is one line of exactly 20 MiB whose id is its last member.
    OverLongAnswer,
    /// The `tools/call` response carries the bytes 0xFF 0xFE inside a JSON string.
    InvalidUtf8,
    /// `tools/call` responses say `"jsonrpc":"1.0"`.
    WrongJsonrpc,
    /// `tools/call` responses carry both `result` and `error`.
    ResultAndError,
    /// Before each `tools/call` response, the same response with an id never sent (424242424).
    UnknownId,
    /// Each `tools/call` response is written twice.
    DuplicateResponse,
    /// The peer's own requests (elicitation, sampling, roots) use string ids `"srv-N"`.
    StringIds,
    /// `tools/call` responses carry `"id":null` (and the real id never gets an answer).
    NullId,
    /// `--count` (default 10000) `notifications/message` before every response.
    NotificationFlood,
    /// Reads every request and answers none of them.
    NeverAnswer,
    /// Exits with status 1 as soon as a `tools/call` arrives.
    ExitMidCall,
    /// Exits with status 3 at once, before reading or binding anything.
    ExitBeforeHandshake,
    /// stdio: closes stdout after the first handshake response, keeps running until stdin closes.
    CloseStdoutStayAlive,
    /// Writes 50 MiB to stderr at start-up, then behaves normally.
    StderrFlood,
    /// stdio: writes every message one byte at a time, `--delay-ms` (default 2) between bytes.
    DripFeed,
    /// `tools/list` always answers `nextCursor: "loop-cursor"`.
    CursorLoop,
    /// `tools/list` serves `--count` (default 100000) tools, `--page-size` (default 1000) per page.
    ManyTools,
    /// `tools/call` results hold 100,000 nested arrays.
    DepthBomb,
    /// HTTP: `tools/call` is answered by one SSE event whose text content is 20 MiB.
    GiantSseEvent,
    /// HTTP: from the `--count`-th request on (default 1), answer 500.
    #[value(name = "http-500")]
    Http500,
    /// HTTP: from the `--count`-th request on (default 1), answer 404.
    #[value(name = "http-404")]
    Http404,
    /// HTTP: from the `--count`-th request on (default 1), answer 405.
    #[value(name = "http-405")]
    Http405,
    /// HTTP: every request is redirected (307) to the same path on 127.0.0.2.
    RedirectOtherHost,
    /// HTTP legacy: a session answers 404 once `--count` (default 3) requests used it.
    SessionExpiry,
    /// `initialize` answers protocolVersion "1999-01-01"; modern requests get -32022 listing only it.
    WrongRevision,
    /// Sleeps `--delay-ms` (default 2000) before answering `initialize` or `server/discover`.
    SlowHandshake,
    /// Ignores SIGTERM and stdin EOF, and keeps a `sleep 1000` grandchild in its process group.
    IgnoreSigterm,
    /// Never answers `server/discover`; `initialize` works.
    DiscoverTimeout,
    /// Sends `notifications/tools/list_changed` before the `initialize` response.
    ListChangedBeforeInit,
    /// Sends a `roots/list` request right after `notifications/initialized` (if roots declared).
    RootsAfterInitialized,
    /// stdio: every line ends with CR LF instead of LF.
    Crlf,
    /// `tools/call` with a progress token: one progress notification after the response.
    ProgressAfterResponse,
    /// HTTP: an SSE comment `: keep-alive` before every SSE event.
    SseComments,
    /// Streamable HTTP legacy: SSE replies end after the priming event; resume with Last-Event-ID.
    CloseSseAfterPriming,
    /// Normal, plus the `journal` tool reporting tagged `slow` calls (running, cancelled, finished).
    CancelJournal,
    /// After `--count` (default 1) calls, `echo`'s definition changes and `added_later` appears.
    RugPull,
    /// Adds tools whose title and description carry direction, control and invisible characters,
    /// and one whose description is 9900 characters long.
    HostileDescriptions,
}

impl Behaviour {
    /// The kebab-case name used on the command line and in the README.
    pub fn name(self) -> String {
        self.to_possible_value()
            .map(|value| value.get_name().to_owned())
            .unwrap_or_else(|| format!("{self:?}"))
    }
}

/// Which protocol eras the peer speaks (`--era`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EraChoice {
    /// Only `initialize`-based revisions (2024-11-05 .. 2025-11-25).
    Legacy,
    /// Only the stateless revision 2026-07-28.
    Modern,
    /// Both: `server/discover` and `initialize` are answered.
    Both,
}

/// How Streamable HTTP answers a POSTed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyMode {
    /// SSE when the peer will send messages before the response, JSON otherwise.
    Auto,
    /// Always SSE (when the client accepts it).
    Sse,
    /// Always JSON (when the client accepts it); related messages go to the GET stream.
    Json,
}

/// Everything the command line decided, shared read-only by all transports.
#[derive(Debug, Clone)]
pub struct Settings {
    pub behaviour: Behaviour,
    pub era: EraChoice,
    pub count: Option<u64>,
    pub delay_ms: Option<u64>,
    pub page_size: usize,
    pub reply_mode: ReplyMode,
}

impl Settings {
    /// `--count`, or the behaviour's documented default.
    pub fn count_or(&self, default: u64) -> u64 {
        self.count.unwrap_or(default)
    }

    /// `--delay-ms`, or the behaviour's documented default.
    pub fn delay_ms_or(&self, default: u64) -> u64 {
        self.delay_ms.unwrap_or(default)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn names_are_kebab_case() {
        assert_eq!(Behaviour::GarbageLines.name(), "garbage-lines");
        assert_eq!(Behaviour::Http500.name(), "http-500");
        assert_eq!(Behaviour::InvalidUtf8.name(), "invalid-utf8");
    }
}
