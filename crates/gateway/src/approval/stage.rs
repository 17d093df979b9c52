//! The approval stage of one `tools/call`: between authorization (an ask rule matched) and
//! forwarding. It records the question in the ledger, bound to the caller, the tool, the SHA-256
//! of the canonical arguments and of the definition in force, and puts it through the best channel
//! the call has:
//! - a legacy client that declared `elicitation`, when the caller may answer: an
//!   `elicitation/create` on the call's own stream, withdrawn (dropping the request sends
//!   `notifications/cancelled`) when Manifold stops waiting;
//! - a modern client that declared `elicitation`, when the caller may answer: an `input_required`
//!   result whose sealed `requestState` names the ledger row; the retry answers it;
//! - otherwise out of band: the call is held while the ledger is polled (`manifold approvals`,
//!   another process or replica, answers there), with progress notifications when the client sent
//!   a token and an optional webhook.
//!
//! Only an explicit yes runs the call, once: every change of the row is conditional, so an answer
//! racing a timeout or a cancellation settles exactly once.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use manifold_wire::{ErrorCode, ErrorObject, Message, patch};
use sha2::{Digest, Sha256};

use super::ledger::{
    self, ApprovalLedger, LedgerEntry, MAX_LEDGER_ARGUMENTS_BYTES, MemoryLedger, Transition,
};
use super::seal::{STATE_PREFIX, StateSeal};
use crate::context::RequestContext;
use crate::policy::{Approver, AskRule};

/// How long a held call waits without a progress channel, unless configured.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(100);
/// How long a held call waits while progress notifications keep its client waiting.
pub const DEFAULT_PROGRESS_WINDOW: Duration = Duration::from_secs(180);
/// How often an out-of-band hold reads the ledger for an answer.
pub const POLL_EVERY: Duration = Duration::from_millis(250);
/// How often a held call with a progress token tells its client it is still waiting (clients
/// reset their timeout on progress).
pub const PROGRESS_EVERY: Duration = Duration::from_secs(10);
/// The `_meta` member a call that ran after approval carries.
pub const APPROVAL_META: &str = "io.manifold/approval";
/// The `data.code` of every refusal of a held call.
pub const APPROVAL_REQUIRED: &str = "approval_required";

/// Tells people outside the call that a question waits (a chat webhook).
pub trait ApprovalAnnouncer: Send + Sync {
    /// Announces one out-of-band question, with the dashboard page that answers it when there is
    /// one; failures are the announcer's to log.
    fn announce(&self, entry: LedgerEntry, page: Option<String>) -> BoxFuture<'static, ()>;
}

/// The approval stage's settings and ledger, shared by every call.
pub struct Approvals {
    ledger: Arc<dyn ApprovalLedger>,
    announcer: Option<Arc<dyn ApprovalAnnouncer>>,
    /// Where the dashboard's approval pages are (`http://HOST:PORT/ui/approvals`), known once
    /// the server listens.
    pages: std::sync::OnceLock<String>,
    seal: StateSeal,
    window: Duration,
    progress_window: Duration,
    holder: String,
    poll_every: Duration,
    progress_every: Duration,
}

impl std::fmt::Debug for Approvals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approvals")
            .field("ledger", &self.ledger.describe())
            .field("window", &self.window)
            .field("progress_window", &self.progress_window)
            .field("announcer", &self.announcer.is_some())
            .finish()
    }
}

impl Default for Approvals {
    fn default() -> Self {
        Approvals::new(
            Arc::new(MemoryLedger::default()),
            DEFAULT_WINDOW,
            DEFAULT_PROGRESS_WINDOW,
        )
    }
}

/// One call held for approval, as the router resolved it.
#[derive(Debug, Clone, Copy)]
pub struct HeldCall<'a> {
    pub ask: &'a AskRule,
    pub server: &'a str,
    /// The exposed tool name.
    pub tool: &'a str,
    /// The tool's raw definition in force (the pinned one when pins are on).
    pub definition: Option<&'a str>,
    /// The upstream's `max_timeout`: no window outlasts it.
    pub cap: Option<Duration>,
}

/// What the stage decided.
#[derive(Debug)]
pub enum Verdict {
    /// Run the call: `request` without the stage's own members, and what to put in the result.
    Run { request: Message, approval: Granted },
    /// Answer with this result (an `input_required` asking the modern client).
    Answer(String),
    /// Answer with this error.
    Refuse(Message),
}

/// An approval that lets one call run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Granted {
    pub id: String,
    pub approver: String,
    pub channel: &'static str,
}

impl Granted {
    /// The `_meta["io.manifold/approval"]` value.
    pub fn meta_json(&self) -> String {
        serde_json::json!({ "id": self.id, "approver": self.approver, "channel": self.channel })
            .to_string()
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

fn random_id() -> String {
    let mut raw = [0u8; 16];
    if getrandom::fill(&mut raw).is_err() {
        let seed = format!("{:?}{}", SystemTime::now(), std::process::id());
        raw.copy_from_slice(&Sha256::digest(seed.as_bytes())[..16]);
    }
    let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    format!("apr_{hex}")
}

/// `host:pid` of this process: a restarted gateway can tell its predecessor's rows.
fn this_holder() -> String {
    format!("{}:{}", this_host(), std::process::id())
}

fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned())
}

/// Whether the client can show a form elicitation (an `elicitation` capability that is not
/// URL mode only).
fn asks_forms(ctx: &RequestContext) -> bool {
    if !ctx.client.declares("elicitation") {
        return false;
    }
    let declares = |mode: &str| {
        patch::get(&ctx.client.capabilities, &["elicitation", mode])
            .ok()
            .flatten()
            .is_some()
    };
    declares("form") || !declares("url")
}

/// Whether the client takes URL-mode elicitation (`elicitation.url` declared).
fn asks_urls(ctx: &RequestContext) -> bool {
    patch::get(&ctx.client.capabilities, &["elicitation", "url"])
        .ok()
        .flatten()
        .is_some()
}

/// The facts a refusal states.
struct Refusal<'a> {
    outcome: &'static str,
    id: Option<&'a str>,
    route: &'a str,
    where_: &'a str,
    held: Duration,
    window: Duration,
    reason: String,
}

impl Approvals {
    pub fn new(
        ledger: Arc<dyn ApprovalLedger>,
        window: Duration,
        progress_window: Duration,
    ) -> Approvals {
        let mut key = [0u8; 32];
        if getrandom::fill(&mut key).is_err() {
            let seed = format!("{:?}{}", SystemTime::now(), std::process::id());
            key.copy_from_slice(&Sha256::digest(seed.as_bytes()));
        }
        Approvals {
            ledger,
            announcer: None,
            pages: std::sync::OnceLock::new(),
            seal: StateSeal::new(key),
            window,
            progress_window,
            holder: this_holder(),
            poll_every: POLL_EVERY,
            progress_every: PROGRESS_EVERY,
        }
    }

    /// Seals `requestState`s under `key`: replicas sharing it accept each other's retries.
    pub fn with_key(mut self, key: [u8; 32]) -> Approvals {
        self.seal = StateSeal::new(key);
        self
    }

    pub fn with_announcer(mut self, announcer: Arc<dyn ApprovalAnnouncer>) -> Approvals {
        self.announcer = Some(announcer);
        self
    }

    /// Where the dashboard answers questions (`BASE/ID` is one question's page): named in the
    /// progress messages and the webhook, and opened by clients that take URL-mode elicitation.
    /// Set once, when the server listens; later calls are ignored.
    pub fn set_pages(&self, base: String) {
        let _ = self.pages.set(base);
    }

    /// The dashboard page of one question, when there is a dashboard.
    pub fn page_of(&self, id: &str) -> Option<String> {
        self.pages.get().map(|base| format!("{base}/{id}"))
    }

    /// Progress notifications this often (tests shorten it).
    pub fn with_progress_every(mut self, every: Duration) -> Approvals {
        self.progress_every = every;
        self
    }

    pub fn ledger(&self) -> &Arc<dyn ApprovalLedger> {
        &self.ledger
    }

    /// Marks the pending rows of gateways on this host that are no longer running as abandoned:
    /// their calls failed when they stopped, and the ledger says so. Returns how many.
    pub async fn recover(&self) -> u64 {
        let host = this_host();
        let Ok(rows) = self.ledger.list(true, 1000).await else {
            return 0;
        };
        let mut dead: Vec<String> = Vec::new();
        for row in rows {
            let Some((h, pid)) = row.holder.rsplit_once(':') else {
                continue;
            };
            let alive = std::path::Path::new(&format!("/proc/{pid}")).exists();
            if h == host && row.holder != self.holder && !alive && !dead.contains(&row.holder) {
                dead.push(row.holder);
            }
        }
        let mut n = 0;
        for holder in dead {
            n += self
                .ledger
                .abandon_held_by(&holder, now_ms())
                .await
                .unwrap_or(0);
        }
        if n > 0 {
            tracing::warn!(
                abandoned = n,
                "approvals held by a gateway that stopped are marked abandoned; their calls failed when it stopped"
            );
        }
        n
    }

    /// Holds one call an ask rule matched until a person answers.
    #[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
    pub async fn hold(
        &self,
        ctx: &RequestContext,
        request: &Message,
        call: HeldCall<'_>,
    ) -> Verdict {
        let caller = ctx.caller.as_ref().map(|c| c.name.clone());
        let arguments = request.params_raw(&["arguments"]).unwrap_or("{}");
        let canonical = crate::pins::canonicalize(arguments);
        let arguments_sha256 = sha256_hex(canonical.as_deref().unwrap_or(arguments).as_bytes());
        let definition_sha256 = call
            .definition
            .map(|d| crate::pins::digest_tool(d).sha256)
            .unwrap_or_default();
        let modern = ctx.client.revision.era() == manifold_wire::Era::Modern;
        if modern
            && let Some(state) = request.params_str(&["requestState"])
            && state.starts_with(STATE_PREFIX)
        {
            return self
                .answer_retry(
                    ctx,
                    request,
                    &call,
                    &state,
                    &arguments_sha256,
                    &definition_sha256,
                )
                .await;
        }
        let has_progress = request.params_raw(&["_meta", "progressToken"]).is_some();
        let mut window = if has_progress {
            self.progress_window
        } else {
            self.window
        };
        if let Some(cap) = call.cap {
            window = window.min(cap);
        }
        let caller_may = call.ask.approvers.contains(&Approver::Caller);
        let inline_legacy = caller_may && !modern && asks_forms(ctx);
        let inline_modern = caller_may && modern && asks_forms(ctx);
        let channel = if inline_legacy {
            ledger::CHANNEL_ELICITATION
        } else if inline_modern {
            ledger::CHANNEL_INPUT_REQUIRED
        } else if self.ledger.is_shared() {
            ledger::CHANNEL_OUT_OF_BAND
        } else {
            let why = "the client cannot be asked (it declared no elicitation, or the caller may not approve), and approvals are kept in this gateway's memory only, so no one else can answer";
            return Verdict::Refuse(self.refusal(
                ctx,
                request,
                &call,
                Refusal {
                    outcome: "not_configured",
                    id: None,
                    route: "none",
                    where_: "nowhere: configure approvers in the ask rule, or use a client with elicitation",
                    held: Duration::ZERO,
                    window,
                    reason: why.to_owned(),
                },
            ));
        };
        let created = now_ms();
        let entry = LedgerEntry {
            id: random_id(),
            state: ledger::PENDING.to_owned(),
            caller: caller.clone(),
            server: call.server.to_owned(),
            tool: call.tool.to_owned(),
            arguments_sha256,
            definition_sha256,
            arguments_json: (arguments.len() <= MAX_LEDGER_ARGUMENTS_BYTES)
                .then(|| arguments.to_owned()),
            approvers: call.ask.approvers.iter().map(Approver::as_text).collect(),
            channel: channel.to_owned(),
            rule: call.ask.rule.label(),
            holder: self.holder.clone(),
            created_at_ms: created,
            expires_at_ms: created.saturating_add(ms(window)),
            answered_by: None,
            answered_at_ms: None,
            note: None,
        };
        if let Err(e) = self.ledger.insert(&entry).await {
            return Verdict::Refuse(self.refusal(
                ctx,
                request,
                &call,
                Refusal {
                    outcome: "not_configured",
                    id: None,
                    route: channel,
                    where_: "nowhere: the ledger could not record the question",
                    held: Duration::ZERO,
                    window,
                    reason: e.to_string(),
                },
            ));
        }
        ctx.audit
            .approval(&format!("{} asked via {channel}", entry.id));
        match channel {
            ledger::CHANNEL_INPUT_REQUIRED => {
                let params = question_params(ctx, &entry, &call);
                let state = self.seal.seal(&entry.id);
                Verdict::Answer(crate::mrtr::input_required(
                    "elicitation/create",
                    Some(&params),
                    &state,
                ))
            }
            ledger::CHANNEL_ELICITATION => {
                self.ask_inline(ctx, request, &call, entry, window).await
            }
            _ => {
                self.hold_out_of_band(ctx, request, &call, entry, window)
                    .await
            }
        }
    }

    async fn ask_inline(
        &self,
        ctx: &RequestContext,
        request: &Message,
        call: &HeldCall<'_>,
        entry: LedgerEntry,
        window: Duration,
    ) -> Verdict {
        let params = question_params(ctx, &entry, call);
        let Some(question) = ctx.peer.request("elicitation/create", Some(params)) else {
            // The transport cannot carry a request after all: fall back to the ledger.
            if self.ledger.is_shared() {
                return self
                    .hold_out_of_band(ctx, request, call, entry, window)
                    .await;
            }
            return self
                .settle(
                    ctx,
                    request,
                    call,
                    &entry,
                    ledger::CANCELLED,
                    None,
                    window,
                    "the client's connection cannot carry the question",
                )
                .await;
        };
        let guard = CancelOnDrop::new(Arc::clone(&self.ledger), &entry.id);
        let started = std::time::Instant::now();
        // Dropping `question` (timeout, or this future dropped when the call is cancelled)
        // withdraws it from the client with notifications/cancelled.
        let answer = tokio::time::timeout(window, question).await;
        let held = started.elapsed();
        let by = entry
            .caller
            .clone()
            .unwrap_or_else(|| "the caller".to_owned());
        let verdict = match answer {
            Err(_) => {
                self.settle(
                    ctx,
                    request,
                    call,
                    &entry,
                    ledger::TIMED_OUT,
                    None,
                    window,
                    "nobody answered the question in the client within the window",
                )
                .await
            }
            Ok(Err(e)) => {
                let why = format!("the client could not show the question: {}", e.message);
                self.settle(
                    ctx,
                    request,
                    call,
                    &entry,
                    ledger::CANCELLED,
                    None,
                    window,
                    &why,
                )
                .await
            }
            Ok(Ok(result)) => {
                let action = patch::get_str(&result, &["action"]).ok().flatten();
                match action.as_deref() {
                    Some("accept") => {
                        self.grant(ctx, request, call, &entry, &by, held, window)
                            .await
                    }
                    Some("decline") => {
                        self.settle(
                            ctx,
                            request,
                            call,
                            &entry,
                            ledger::REJECTED,
                            Some(&by),
                            window,
                            "declined in the client",
                        )
                        .await
                    }
                    _ => {
                        self.settle(
                            ctx,
                            request,
                            call,
                            &entry,
                            ledger::CANCELLED,
                            None,
                            window,
                            "the question was dismissed in the client",
                        )
                        .await
                    }
                }
            }
        };
        guard.disarm();
        verdict
    }

    async fn hold_out_of_band(
        &self,
        ctx: &RequestContext,
        request: &Message,
        call: &HeldCall<'_>,
        entry: LedgerEntry,
        window: Duration,
    ) -> Verdict {
        if let Some(announcer) = &self.announcer {
            tokio::spawn(announcer.announce(entry.clone(), self.page_of(&entry.id)));
        }
        if let Some(page) = self.page_of(&entry.id)
            && asks_urls(ctx)
        {
            // The client opens the page for its user; the answer comes from the page (the
            // ledger), so what the client says back (accepted, declined) changes nothing.
            let params = serde_json::json!({
                "mode": "url",
                "elicitationId": entry.id,
                "url": page,
                "message": format!("A person must approve {} before it runs: open the page to approve or deny it (approval {}).", call.tool, entry.id),
            });
            if let Some(asked) = ctx
                .peer
                .request("elicitation/create", Some(params.to_string()))
            {
                tokio::spawn(async move {
                    let _ = asked.await;
                });
            }
        }
        let guard = CancelOnDrop::new(Arc::clone(&self.ledger), &entry.id);
        let started = std::time::Instant::now();
        let token = request
            .params_raw(&["_meta", "progressToken"])
            .map(str::to_owned);
        let where_ = self.where_to_answer(&entry.id);
        let mut next_progress = started;
        let mut progress = 0u64;
        let verdict = loop {
            if let Some(token) = &token
                && std::time::Instant::now() >= next_progress
            {
                progress += 1;
                let message = format!(
                    "waiting for a person to approve {} (approval {}): {where_}",
                    call.tool, entry.id
                );
                let params = serde_json::json!({ "progress": progress, "message": message });
                let params = patch::set(&params.to_string(), &["progressToken"], token)
                    .unwrap_or_else(|_| params.to_string());
                ctx.peer.notify(Message::notification(
                    "notifications/progress",
                    Some(&params),
                ));
                next_progress += self.progress_every;
            }
            let row = self.ledger.get(&entry.id).await;
            let held = started.elapsed();
            match row {
                Ok(Some(row)) if row.state == ledger::APPROVED => {
                    let by = row.answered_by.unwrap_or_else(|| "an approver".to_owned());
                    break self
                        .use_approval(ctx, request, call, &entry, &by, held, window)
                        .await;
                }
                Ok(Some(row)) if row.state != ledger::PENDING => {
                    break Verdict::Refuse(
                        self.refusal_for_row(ctx, request, call, &row, held, window),
                    );
                }
                _ => {}
            }
            if held >= window {
                break self
                    .settle(
                        ctx,
                        request,
                        call,
                        &entry,
                        ledger::TIMED_OUT,
                        None,
                        window,
                        "nobody answered within the window",
                    )
                    .await;
            }
            tokio::time::sleep(self.poll_every.min(window.saturating_sub(held))).await;
        };
        guard.disarm();
        verdict
    }

    fn where_to_answer(&self, id: &str) -> String {
        let mut out = format!("answer with `manifold approvals approve {id}` (or `deny`)");
        if let Some(page) = self.page_of(id) {
            out.push_str(&format!(", or at {page}"));
        }
        if self.announcer.is_some() {
            out.push_str(", or from the chat the webhook posted to");
        }
        out
    }

    /// The modern client's retry answering an `input_required` question.
    #[allow(clippy::too_many_lines)] // predates the 100-line limit; split when next changed
    async fn answer_retry(
        &self,
        ctx: &RequestContext,
        request: &Message,
        call: &HeldCall<'_>,
        state: &str,
        arguments_sha256: &str,
        definition_sha256: &str,
    ) -> Verdict {
        let fail = |reason: String| {
            Verdict::Refuse(Message::error(
                request.id().cloned(),
                &ErrorObject::new(ErrorCode::InvalidParams, reason),
            ))
        };
        let Some(id) = self.seal.open(state) else {
            return fail("the requestState is not one Manifold issued (or it was altered); call the tool again without it to be asked".to_owned());
        };
        let row = match self.ledger.get(&id).await {
            Ok(Some(row)) => row,
            Ok(None) => {
                return fail(format!(
                    "approval {id} is not in the ledger (it expired or this gateway restarted without a store); call the tool again to be asked"
                ));
            }
            Err(e) => return fail(format!("approval {id} could not be read: {e}")),
        };
        let caller = ctx.caller.as_ref().map(|c| c.name.clone());
        if row.channel != ledger::CHANNEL_INPUT_REQUIRED
            || row.caller != caller
            || row.tool != call.tool
            || row.arguments_sha256 != arguments_sha256
            || row.definition_sha256 != definition_sha256
        {
            return fail(format!(
                "approval {id} was asked for another call (a different caller, tool, arguments or tool definition); call the tool again to be asked for this one"
            ));
        }
        let window = Duration::from_millis(
            u64::try_from(row.expires_at_ms.saturating_sub(row.created_at_ms)).unwrap_or(0),
        );
        let held = Duration::from_millis(
            u64::try_from(now_ms().saturating_sub(row.created_at_ms)).unwrap_or(0),
        );
        // Approved already (an approver answered from `manifold approvals` while the client was
        // asked): the client's accept uses it.
        if row.state != ledger::PENDING && row.state != ledger::APPROVED {
            return Verdict::Refuse(self.refusal_for_row(ctx, request, call, &row, held, window));
        }
        if row.state == ledger::PENDING && now_ms() > row.expires_at_ms {
            return self
                .settle(
                    ctx,
                    request,
                    call,
                    &row,
                    ledger::TIMED_OUT,
                    None,
                    window,
                    "the client answered after the window",
                )
                .await;
        }
        let by = caller.unwrap_or_else(|| "the caller".to_owned());
        let answer = request
            .params_raw(&["inputResponses", crate::mrtr::INPUT_KEY])
            .and_then(|raw| patch::get_str(raw, &["action"]).ok().flatten());
        let stripped = match (request.id(), request.params()) {
            (Some(id), Some(params)) => {
                patch::without_members(params, &["requestState", "inputResponses"])
                    .ok()
                    .map(|p| Message::request(id, "tools/call", Some(&p)))
            }
            _ => None,
        };
        let Some(stripped) = stripped else {
            return fail("the retry's params are not an object".to_owned());
        };
        // Approved outside the client, but the caller said no here: the caller's no stands.
        if row.state == ledger::APPROVED
            && let Some(action) = answer.as_deref().filter(|a| *a != "accept")
        {
            let (to, note) = if action == "decline" {
                (ledger::REJECTED, "declined in the client")
            } else {
                (
                    ledger::CANCELLED,
                    "the question was dismissed in the client",
                )
            };
            let _ = self
                .ledger
                .transition(Transition {
                    id: &row.id,
                    from: ledger::APPROVED,
                    to,
                    by: Some(&by),
                    at_ms: now_ms(),
                    note: Some(note),
                })
                .await;
            return self
                .refusal_now(ctx, request, call, &row, held, window)
                .await;
        }
        match answer.as_deref() {
            Some("accept") => {
                self.grant(ctx, &stripped, call, &row, &by, held, window)
                    .await
            }
            Some("decline") => {
                self.settle(
                    ctx,
                    request,
                    call,
                    &row,
                    ledger::REJECTED,
                    Some(&by),
                    window,
                    "declined in the client",
                )
                .await
            }
            Some(_) => {
                self.settle(
                    ctx,
                    request,
                    call,
                    &row,
                    ledger::CANCELLED,
                    None,
                    window,
                    "the question was dismissed in the client",
                )
                .await
            }
            None => fail(format!(
                "the retry carries no inputResponses.{}.action; answer the question Manifold asked",
                crate::mrtr::INPUT_KEY
            )),
        }
    }

    /// The caller answered yes inline: record it, then use it.
    #[allow(clippy::too_many_arguments)]
    async fn grant(
        &self,
        ctx: &RequestContext,
        request: &Message,
        call: &HeldCall<'_>,
        entry: &LedgerEntry,
        by: &str,
        held: Duration,
        window: Duration,
    ) -> Verdict {
        let answered = self
            .ledger
            .transition(Transition {
                id: &entry.id,
                from: ledger::PENDING,
                to: ledger::APPROVED,
                by: Some(by),
                at_ms: now_ms(),
                note: None,
            })
            .await;
        if !matches!(answered, Ok(true)) {
            // Someone the rule names approved it first, outside the client: that yes counts.
            if let Ok(Some(row)) = self.ledger.get(&entry.id).await
                && row.state == ledger::APPROVED
            {
                let by = row.answered_by.unwrap_or_else(|| "an approver".to_owned());
                return self
                    .use_approval(ctx, request, call, entry, &by, held, window)
                    .await;
            }
            return self
                .refusal_now(ctx, request, call, entry, held, window)
                .await;
        }
        self.use_approval(ctx, request, call, entry, by, held, window)
            .await
    }

    /// An approved row is used once: whoever moves it to `used` runs the call.
    #[allow(clippy::too_many_arguments)]
    async fn use_approval(
        &self,
        ctx: &RequestContext,
        request: &Message,
        call: &HeldCall<'_>,
        entry: &LedgerEntry,
        by: &str,
        held: Duration,
        window: Duration,
    ) -> Verdict {
        let used = self
            .ledger
            .transition(Transition {
                id: &entry.id,
                from: ledger::APPROVED,
                to: ledger::USED,
                by: None,
                at_ms: now_ms(),
                note: None,
            })
            .await;
        if !matches!(used, Ok(true)) {
            return self
                .refusal_now(ctx, request, call, entry, held, window)
                .await;
        }
        ctx.audit.approval(&format!(
            "{} approved by {by} via {}",
            entry.id, entry.channel
        ));
        let channel = channel_name(&entry.channel);
        manifold_telemetry::metrics::count_approval(call.server, channel, "approved");
        Verdict::Run {
            request: request.clone(),
            approval: Granted {
                id: entry.id.clone(),
                approver: by.to_owned(),
                channel,
            },
        }
    }

    /// Someone else settled the row first: refuse as the row now says.
    async fn refusal_now(
        &self,
        ctx: &RequestContext,
        request: &Message,
        call: &HeldCall<'_>,
        entry: &LedgerEntry,
        held: Duration,
        window: Duration,
    ) -> Verdict {
        let row = self
            .ledger
            .get(&entry.id)
            .await
            .ok()
            .flatten()
            .unwrap_or_else(|| entry.clone());
        Verdict::Refuse(self.refusal_for_row(ctx, request, call, &row, held, window))
    }

    /// Ends a pending row as `to` and refuses the call; when someone settled it first, their
    /// outcome is the one stated.
    #[allow(clippy::too_many_arguments)]
    async fn settle(
        &self,
        ctx: &RequestContext,
        request: &Message,
        call: &HeldCall<'_>,
        entry: &LedgerEntry,
        to: &'static str,
        by: Option<&str>,
        window: Duration,
        note: &str,
    ) -> Verdict {
        let held = Duration::from_millis(
            u64::try_from(now_ms().saturating_sub(entry.created_at_ms)).unwrap_or(0),
        );
        let moved = self
            .ledger
            .transition(Transition {
                id: &entry.id,
                from: ledger::PENDING,
                to,
                by,
                at_ms: now_ms(),
                note: Some(note),
            })
            .await;
        if !matches!(moved, Ok(true)) {
            // An approval that landed just before the window closed still counts.
            if let Ok(Some(row)) = self.ledger.get(&entry.id).await
                && row.state == ledger::APPROVED
            {
                let by = row.answered_by.unwrap_or_else(|| "an approver".to_owned());
                return self
                    .use_approval(ctx, request, call, entry, &by, held, window)
                    .await;
            }
            return self
                .refusal_now(ctx, request, call, entry, held, window)
                .await;
        }
        let mut row = entry.clone();
        row.state = to.to_owned();
        row.answered_by = by.map(str::to_owned);
        row.note = Some(note.to_owned());
        Verdict::Refuse(self.refusal_for_row(ctx, request, call, &row, held, window))
    }

    fn refusal_for_row(
        &self,
        ctx: &RequestContext,
        request: &Message,
        call: &HeldCall<'_>,
        row: &LedgerEntry,
        held: Duration,
        window: Duration,
    ) -> Message {
        let (outcome, reason) = match row.state.as_str() {
            ledger::REJECTED => (
                "rejected",
                format!(
                    "{} rejected it{}",
                    row.answered_by.as_deref().unwrap_or("an approver"),
                    row.note
                        .as_deref()
                        .filter(|n| !n.is_empty())
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default()
                ),
            ),
            ledger::TIMED_OUT => (
                "timed_out",
                format!("nobody approved it within {} s", window.as_secs()),
            ),
            ledger::USED => (
                "rejected",
                "the approval was already used by another call (an approval is single use)"
                    .to_owned(),
            ),
            ledger::ABANDONED => ("cancelled", "the gateway holding it stopped".to_owned()),
            _ => (
                "cancelled",
                row.note
                    .clone()
                    .unwrap_or_else(|| "the question was withdrawn".to_owned()),
            ),
        };
        let where_ = self.where_to_answer(&row.id);
        self.refusal(
            ctx,
            request,
            call,
            Refusal {
                outcome,
                id: Some(&row.id),
                route: &row.channel,
                where_: &where_,
                held,
                window,
                reason,
            },
        )
    }

    fn refusal(
        &self,
        ctx: &RequestContext,
        request: &Message,
        call: &HeldCall<'_>,
        r: Refusal<'_>,
    ) -> Message {
        ctx.audit
            .refusal(manifold_telemetry::audit::AuditOutcome::RefusedByPolicy);
        ctx.audit
            .approval(&format!("{} {}", r.id.unwrap_or("(not asked)"), r.outcome));
        let who = match &ctx.caller {
            Some(c) => format!("{:?}", c.name),
            None => "the anonymous caller".to_owned(),
        };
        let id_text = r.id.map(|i| format!(" (approval {i})")).unwrap_or_default();
        let message = format!(
            "Manifold did not run {:?} on {:?} for {who}: {} requires a person's approval first{id_text}, and {}; held {} s of a {} s window. {}",
            call.tool,
            call.server,
            call.ask.rule.label(),
            r.reason,
            r.held.as_secs(),
            r.window.as_secs(),
            match r.outcome {
                "rejected" =>
                    "Do not retry this call unless the user asks for it again.".to_owned(),
                "not_configured" => "An operator must configure who can approve it.".to_owned(),
                _ => format!("Calling again asks again; {}.", r.where_),
            }
        );
        let data = serde_json::json!({
            "code": APPROVAL_REQUIRED,
            "outcome": r.outcome,
            "approval_id": r.id,
            "route": r.route,
            "where": r.where_,
            "held_seconds": r.held.as_secs(),
            "window_seconds": r.window.as_secs(),
            "rule": { "index": call.ask.rule.index, "name": call.ask.rule.name },
        });
        let object = ErrorObject::new(ErrorCode::Forbidden, message);
        let object = match serde_json::value::RawValue::from_string(data.to_string()) {
            Ok(raw) => object.with_data(raw),
            Err(_) => object,
        };
        Message::error(request.id().cloned(), &object)
    }
}

/// A channel as a static name, for metrics (`none`: the question could not be put).
fn channel_name(channel: &str) -> &'static str {
    match channel {
        ledger::CHANNEL_ELICITATION => ledger::CHANNEL_ELICITATION,
        ledger::CHANNEL_INPUT_REQUIRED => ledger::CHANNEL_INPUT_REQUIRED,
        ledger::CHANNEL_OUT_OF_BAND => ledger::CHANNEL_OUT_OF_BAND,
        _ => "none",
    }
}

/// The form elicitation that asks the caller: server, tool and caller named, the exact arguments
/// shown, nothing to fill in (accept runs the call, decline refuses it).
fn question_params(ctx: &RequestContext, entry: &LedgerEntry, call: &HeldCall<'_>) -> String {
    let shown = entry
        .arguments_json
        .as_deref()
        .and_then(|a| serde_json::from_str::<serde_json::Value>(a).ok())
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| format!("(too large to show; SHA-256 {})", entry.arguments_sha256));
    let who = ctx
        .caller
        .as_ref()
        .map(|c| c.name.as_str())
        .unwrap_or("you");
    let message = format!(
        "Approve this call? {who} asks to run the tool {:?} on the server {:?} ({}) with these arguments:\n{shown}\nAccept runs it once, with exactly these arguments; decline refuses it. Approval {}.",
        call.tool,
        call.server,
        call.ask.rule.label(),
        entry.id
    );
    serde_json::json!({
        "message": message,
        "requestedSchema": { "type": "object", "properties": {} },
    })
    .to_string()
}

/// Marks a pending row cancelled when the call holding it is dropped (cancelled, stream
/// closed) before it settled.
struct CancelOnDrop {
    ledger: Arc<dyn ApprovalLedger>,
    id: String,
    armed: bool,
}

impl CancelOnDrop {
    fn new(ledger: Arc<dyn ApprovalLedger>, id: &str) -> CancelOnDrop {
        CancelOnDrop {
            ledger,
            id: id.to_owned(),
            armed: true,
        }
    }

    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let ledger = Arc::clone(&self.ledger);
        let id = std::mem::take(&mut self.id);
        runtime.spawn(async move {
            let _ = ledger
                .transition(Transition {
                    id: &id,
                    from: ledger::PENDING,
                    to: ledger::CANCELLED,
                    by: None,
                    at_ms: now_ms(),
                    note: Some("the call was cancelled, or its client went away, while the question was open"),
                })
                .await;
        });
    }
}
