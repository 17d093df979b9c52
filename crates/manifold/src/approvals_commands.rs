//! `manifold approvals list|show|approve|deny`: the person's side of approvals, for questions put
//! out of band (or read beside an elicitation). A gateway holding a call that a rule marks
//! `effect = "ask"` records the question in the store; an approver answers it here, from another
//! process, and the gateway holding the call (polling its ledger) lets it run or refuses it.
//!
//! The store is opened as `manifold pins` opens it (beside a running gateway). Every answer is a
//! transition conditional on the row still being pending, so an answer racing a timeout, another
//! approver or the caller's cancellation settles exactly once. Who may answer follows the rule's
//! `approvers`: `identity:NAME`, `group:G` (a group the answerer's API key in the store carries),
//! or `caller` (the caller answering their own call).

use manifold_store::timestamps::now_ms;
use std::sync::Arc;

use clap::Subcommand;
use manifold_gateway::approval::ledger::{
    APPROVED, ApprovalLedger, LedgerEntry, PENDING, REJECTED, TIMED_OUT, Transition,
};
use manifold_store::Store;
use serde_json::{Value, json};

use crate::approval_store::StoreApprovals;
use crate::report::{CliError, Outcome};
use manifold_store::timestamps::utc_rfc3339;

/// Rows `list --all` shows (the newest ones).
pub const ALL_ROWS_SHOWN: usize = 50;
/// Rows `list` shows of the pending ones (the newest ones): one page of the store.
pub const PENDING_ROWS_SHOWN: usize = manifold_store::MAX_APPROVAL_PAGE;
/// Who answers when neither `--as` nor `USER` says.
pub const DEFAULT_ANSWERER: &str = "operator";
/// Widest a table cell is shown, in characters (`show` and `--json` have the whole text).
const MAX_CELL_CHARS: usize = 64;
/// The approvers entry letting a caller answer their own call.
const CALLER_APPROVER: &str = "caller";

#[derive(Debug, Subcommand)]
pub enum ApprovalsAction {
    /// List approvals waiting for an answer (with --all: the newest of every state).
    List {
        /// Every state, not only pending (the newest 50).
        #[arg(long)]
        all: bool,
        /// Print the rows as a JSON array, every field.
        #[arg(long)]
        json: bool,
        /// The configuration file, for its store (default: $MANIFOLD_CONFIG, else ./manifold.toml or ~/.config/manifold/manifold.toml if present).
        #[arg(long, short = 'c')]
        config: Option<std::path::PathBuf>,
    },
    /// Show every field of one approval, its arguments pretty-printed.
    Show {
        /// The approval's id (`apr_...`).
        id: String,
        /// Print the row as JSON.
        #[arg(long)]
        json: bool,
        /// The configuration file, for its store (default: $MANIFOLD_CONFIG, else ./manifold.toml or ~/.config/manifold/manifold.toml if present).
        #[arg(long, short = 'c')]
        config: Option<std::path::PathBuf>,
    },
    /// Approve a pending call: it runs once, with exactly the arguments shown.
    Approve {
        /// The approval's id (`apr_...`).
        id: String,
        /// Who answers (default: $USER, else "operator"); must be one of the rule's approvers.
        #[arg(long = "as", value_name = "NAME")]
        name: Option<String>,
        /// The configuration file, for its store (default: $MANIFOLD_CONFIG, else ./manifold.toml or ~/.config/manifold/manifold.toml if present).
        #[arg(long, short = 'c')]
        config: Option<std::path::PathBuf>,
    },
    /// Deny a pending call: the caller is told it was refused.
    Deny {
        /// The approval's id (`apr_...`).
        id: String,
        /// Who answers (default: $USER, else "operator"); must be one of the rule's approvers.
        #[arg(long = "as", value_name = "NAME")]
        name: Option<String>,
        /// Why, recorded with the answer.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
        /// The configuration file, for its store (default: $MANIFOLD_CONFIG, else ./manifold.toml or ~/.config/manifold/manifold.toml if present).
        #[arg(long, short = 'c')]
        config: Option<std::path::PathBuf>,
    },
}

/// `manifold approvals ...`: exit 0 done, 2 refused (the message says why and what to do), 1 when
/// the store or configuration fails.
pub async fn run(action: &ApprovalsAction) -> Result<Outcome, CliError> {
    let given = match action {
        ApprovalsAction::List { config, .. }
        | ApprovalsAction::Show { config, .. }
        | ApprovalsAction::Approve { config, .. }
        | ApprovalsAction::Deny { config, .. } => config.as_deref(),
    };
    let config = crate::config_file::load_config(given)?;
    let store = crate::key_store::open_for_command(&config).await?;
    let ledger = StoreApprovals::new(Arc::clone(&store));
    let now = now_ms();
    let outcome = match action {
        ApprovalsAction::List { all, json, .. } => list(&ledger, *all, *json, now).await,
        ApprovalsAction::Show { id, json, .. } => show(&ledger, id, *json, now).await,
        ApprovalsAction::Approve { id, name, .. } => {
            let answer = Answer::Approve;
            answer_one(&store, &ledger, id, &answerer(name.as_deref()), answer, now).await
        }
        ApprovalsAction::Deny {
            id, name, reason, ..
        } => {
            let answer = Answer::Deny(reason.as_deref());
            answer_one(&store, &ledger, id, &answerer(name.as_deref()), answer, now).await
        }
    };
    drop(ledger);
    crate::key_store::close(store).await;
    match outcome {
        Ok(o) => Ok(o),
        Err(Failure::Refused(e)) => {
            eprintln!("{e}");
            Ok(Outcome::ToolError)
        }
        Err(Failure::Failed(e)) => Err(e),
    }
}

/// Why a command did not do what was asked.
pub(crate) enum Failure {
    /// The request was understood and refused (exit 2).
    Refused(CliError),
    /// The store failed (exit 1).
    Failed(CliError),
}

fn refused(message: String, hint: impl Into<String>) -> Failure {
    Failure::Refused(CliError::with_hint(message, hint))
}

fn ledger_failed(e: manifold_gateway::approval::ledger::LedgerError) -> Failure {
    Failure::Failed(CliError::with_hint(
        e.to_string(),
        "approvals live in the store ([store], or store.sqlite in gateway.data_dir); give this command the gateway's configuration",
    ))
}

/// `--as NAME`, else `$USER`, else [`DEFAULT_ANSWERER`].
fn answerer(given: Option<&str>) -> String {
    given
        .map(str::to_owned)
        .or_else(|| std::env::var("USER").ok())
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_ANSWERER.to_owned())
}

pub(crate) fn shown_time(ms: i64) -> String {
    utc_rfc3339(u64::try_from(ms / 1000).unwrap_or(0))
}

/// A span of milliseconds as people read it: `45s`, `12m`, `3h`, `2d`.
pub(crate) fn span(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

pub(crate) fn expires_in(row: &LedgerEntry, now: i64) -> String {
    if row.expires_at_ms < now {
        format!("expired {} ago", span(now - row.expires_at_ms))
    } else {
        span(row.expires_at_ms - now)
    }
}

pub(crate) fn caller_of(row: &LedgerEntry) -> &str {
    row.caller.as_deref().unwrap_or("anonymous")
}

/// `text` with control characters escaped: names, reasons and arguments come from clients and
/// must not move the operator's cursor or recolour the terminal.
fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// A stored text as a table cell: control characters escaped, at most [`MAX_CELL_CHARS`] wide,
/// `-` when empty.
fn cell(text: &str) -> String {
    if text.is_empty() {
        return "-".to_owned();
    }
    let escaped = escape_controls(text);
    if escaped.chars().count() <= MAX_CELL_CHARS {
        return escaped;
    }
    let mut cut: String = escaped.chars().take(MAX_CELL_CHARS - 1).collect();
    cut.push('…');
    cut
}

fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_owned()
    };
    let mut out = line(&header.iter().map(|h| (*h).to_owned()).collect::<Vec<_>>());
    out.push('\n');
    for row in rows {
        out.push_str(&line(row));
        out.push('\n');
    }
    out
}

/// Every field of a row as JSON (the arguments parsed when they are JSON).
fn row_json(row: &LedgerEntry) -> Value {
    let arguments = row
        .arguments_json
        .as_deref()
        .map(|a| serde_json::from_str::<Value>(a).unwrap_or_else(|_| Value::from(a)));
    json!({
        "id": row.id,
        "state": row.state,
        "caller": row.caller,
        "server": row.server,
        "tool": row.tool,
        "arguments_sha256": row.arguments_sha256,
        "definition_sha256": row.definition_sha256,
        "arguments": arguments,
        "approvers": row.approvers,
        "channel": row.channel,
        "rule": row.rule,
        "holder": row.holder,
        "created_at_ms": row.created_at_ms,
        "expires_at_ms": row.expires_at_ms,
        "answered_by": row.answered_by,
        "answered_at_ms": row.answered_at_ms,
        "note": row.note,
    })
}

fn print_json(value: &Value) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(value).map_err(|e| {
        Failure::Failed(CliError::usage(format!(
            "could not print the approvals: {e}"
        )))
    })?;
    println!("{text}");
    Ok(())
}

/// `manifold approvals list [--all] [--json]`.
async fn list(
    ledger: &StoreApprovals,
    all: bool,
    json: bool,
    now: i64,
) -> Result<Outcome, Failure> {
    let limit = if all {
        ALL_ROWS_SHOWN
    } else {
        PENDING_ROWS_SHOWN
    };
    let rows = ledger.list(!all, limit).await.map_err(ledger_failed)?;
    if json {
        print_json(&Value::Array(rows.iter().map(row_json).collect()))?;
        return Ok(Outcome::Success);
    }
    if rows.is_empty() {
        let what = if all {
            "approvals"
        } else {
            "pending approvals"
        };
        println!("no {what} in {}", ledger.describe());
        return Ok(Outcome::Success);
    }
    let mut header = vec!["ID"];
    if all {
        header.push("STATE");
    }
    header.extend(["AGE", "CALLER", "SERVER/TOOL", "CHANNEL", "EXPIRES IN"]);
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut c = vec![cell(&r.id)];
            if all {
                c.push(cell(&r.state));
            }
            let expires = if r.state == PENDING {
                expires_in(r, now)
            } else {
                "-".to_owned()
            };
            c.extend([
                span(now - r.created_at_ms),
                cell(caller_of(r)),
                cell(&format!("{}/{}", r.server, r.tool)),
                cell(&r.channel),
                expires,
            ]);
            c
        })
        .collect();
    print!("{}", table(&header, &cells));
    Ok(Outcome::Success)
}

fn unknown(ledger: &StoreApprovals, id: &str) -> Failure {
    refused(
        format!("no approval {id:?} in {}", ledger.describe()),
        "`manifold approvals list --all` shows the newest approvals and their ids; check --config names the gateway's store",
    )
}

/// `manifold approvals show ID [--json]`.
async fn show(ledger: &StoreApprovals, id: &str, json: bool, now: i64) -> Result<Outcome, Failure> {
    let row = ledger
        .get(id)
        .await
        .map_err(ledger_failed)?
        .ok_or_else(|| unknown(ledger, id))?;
    if json {
        print_json(&row_json(&row))?;
        return Ok(Outcome::Success);
    }
    print!("{}", render(&row, now));
    Ok(Outcome::Success)
}

fn render(row: &LedgerEntry, now: i64) -> String {
    let opt = |v: Option<&str>| v.unwrap_or("-").to_owned();
    let approvers = if row.approvers.is_empty() {
        "-".to_owned()
    } else {
        row.approvers.join(", ")
    };
    let expires = if row.state == PENDING && row.expires_at_ms < now {
        format!(
            "{} ({})",
            shown_time(row.expires_at_ms),
            expires_in(row, now)
        )
    } else if row.state == PENDING {
        format!(
            "{} ({} left)",
            shown_time(row.expires_at_ms),
            expires_in(row, now)
        )
    } else {
        shown_time(row.expires_at_ms)
    };
    let fields = [
        ("id", row.id.clone()),
        ("state", row.state.clone()),
        ("caller", caller_of(row).to_owned()),
        ("server", row.server.clone()),
        ("tool", row.tool.clone()),
        ("rule", row.rule.clone()),
        ("approvers", approvers),
        ("channel", row.channel.clone()),
        ("holder", row.holder.clone()),
        (
            "created",
            format!(
                "{} ({} ago)",
                shown_time(row.created_at_ms),
                span(now - row.created_at_ms)
            ),
        ),
        ("expires", expires),
        ("answered by", opt(row.answered_by.as_deref())),
        (
            "answered at",
            row.answered_at_ms
                .map_or_else(|| "-".to_owned(), shown_time),
        ),
        ("note", opt(row.note.as_deref())),
        ("arguments sha256", row.arguments_sha256.clone()),
        ("definition sha256", row.definition_sha256.clone()),
    ];
    let width = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (k, v) in fields {
        out.push_str(&format!("{k:<width$}  {}\n", cell(&v)));
    }
    out.push_str("arguments:\n");
    let arguments = match row.arguments_json.as_deref() {
        None => {
            "  (not kept: larger than the store keeps; compare the arguments sha256)".to_owned()
        }
        Some(text) => {
            let pretty = serde_json::from_str::<Value>(text)
                .ok()
                .and_then(|v| serde_json::to_string_pretty(&v).ok())
                .unwrap_or_else(|| text.to_owned());
            pretty
                .lines()
                .map(|l| format!("  {}", escape_controls(l)))
                .collect::<Vec<_>>()
                .join("\n")
        }
    };
    out.push_str(&arguments);
    out.push('\n');
    out
}

/// What an answer does.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Answer<'a> {
    Approve,
    /// With the reason given, if any.
    Deny(Option<&'a str>),
}

/// Says how a settled row ended: `approved by bob at 2026-...Z`, `timed_out at ...`.
pub(crate) fn how_it_ended(row: &LedgerEntry) -> String {
    let mut text = row.state.clone();
    if let Some(by) = &row.answered_by {
        text.push_str(&format!(" by {by}"));
    }
    if let Some(at) = row.answered_at_ms {
        text.push_str(&format!(" at {}", shown_time(at)));
    }
    if let Some(note) = &row.note {
        text.push_str(&format!(" ({})", escape_controls(note)));
    }
    text
}

fn not_pending(row: &LedgerEntry) -> Failure {
    refused(
        format!(
            "approval {} is not pending: it is {}; nothing was changed",
            row.id,
            how_it_ended(row)
        ),
        "only a pending approval can be answered; if the call is still wanted, the caller calls again and a new approval is asked",
    )
}

/// Whether `name` may answer `row`: by `identity:NAME`, by `group:G` for a group one of `name`'s
/// unrevoked API keys carries, or by `caller` when `name` is the row's caller. A caller answers
/// their own call only under `caller`: neither their identity nor their groups let them. A call
/// without an identity (authentication off) under `caller` is answered by whoever runs this: every
/// caller is the same anonymous one then, and only the person at this machine can reach the store.
fn may_answer(row: &LedgerEntry, name: &str, groups: &[String]) -> Result<(), Failure> {
    let callers_allowed = row.approvers.iter().any(|a| a == CALLER_APPROVER);
    let own = row.caller.as_deref() == Some(name);
    let allowed = if callers_allowed && row.caller.is_none() {
        true
    } else if own {
        callers_allowed
    } else {
        row.approvers.iter().any(|a| {
            if let Some(identity) = a.strip_prefix("identity:") {
                return identity == name;
            }
            if let Some(group) = a.strip_prefix("group:") {
                return groups.iter().any(|g| g == group);
            }
            false
        })
    };
    if allowed {
        return Ok(());
    }
    let approvers = if row.approvers.is_empty() {
        "none".to_owned()
    } else {
        row.approvers.join(", ")
    };
    let message = if own {
        format!(
            "{name} may not answer approval {}: {name} is its caller, and a caller may not approve their own call under this rule ({}; approvers: {approvers}, without `caller`); nothing was changed",
            row.id, row.rule
        )
    } else {
        format!(
            "{name} may not answer approval {} (rule {}; approvers: {approvers}); nothing was changed",
            row.id, row.rule
        )
    };
    Err(refused(
        message,
        "answer as one of the approvers with --as NAME: identity:NAME names a person, group:G anyone (but the caller) whose API key in the store carries group G, caller the caller",
    ))
}

/// The groups of every unrevoked API key in the store whose principal is `name`.
async fn groups_of(store: &Store, name: &str) -> Result<Vec<String>, Failure> {
    let keys = store.api_keys().list().await.map_err(|e| {
        Failure::Failed(CliError::usage(format!(
            "could not read the API keys to check who may answer: {e}"
        )))
    })?;
    Ok(keys
        .into_iter()
        .filter(|k| k.principal == name && k.revoked_at_ms.is_none())
        .flat_map(|k| k.groups)
        .collect())
}

/// `manifold approvals approve|deny ID`.
async fn answer_one(
    store: &Store,
    ledger: &StoreApprovals,
    id: &str,
    name: &str,
    answer: Answer<'_>,
    now: i64,
) -> Result<Outcome, Failure> {
    println!(
        "{}",
        answer_approval(store, ledger, id, name, answer, now).await?
    );
    Ok(Outcome::Success)
}

impl Failure {
    /// What went wrong and what to do, in one text (the dashboard shows it on the page).
    pub(crate) fn into_error(self) -> CliError {
        match self {
            Failure::Refused(e) | Failure::Failed(e) => e,
        }
    }
}

/// Answers one pending approval as `name` (the CLI and the dashboard): what was done, in one
/// line, or why nothing was.
pub(crate) async fn answer_approval(
    store: &Store,
    ledger: &StoreApprovals,
    id: &str,
    name: &str,
    answer: Answer<'_>,
    now: i64,
) -> Result<String, Failure> {
    let row = ledger
        .get(id)
        .await
        .map_err(ledger_failed)?
        .ok_or_else(|| unknown(ledger, id))?;
    if row.state != PENDING {
        return Err(not_pending(&row));
    }
    let what = format!("{}/{} for {}", row.server, row.tool, caller_of(&row));
    if row.expires_at_ms < now {
        let timed_out = ledger
            .transition(Transition {
                id,
                from: PENDING,
                to: TIMED_OUT,
                by: None,
                at_ms: now,
                note: Some("expired before it was answered"),
            })
            .await
            .map_err(ledger_failed)?;
        if !timed_out {
            return Err(settled_meanwhile(ledger, id).await);
        }
        return Err(refused(
            format!(
                "approval {id} ({what}) expired at {} ({} ago), before it was answered; it is now timed_out and nothing was approved or denied",
                shown_time(row.expires_at_ms),
                span(now - row.expires_at_ms)
            ),
            "the caller was told the question timed out; if the call is still wanted, the caller calls again and a new approval is asked",
        ));
    }
    may_answer(&row, name, &groups_of(store, name).await?)?;
    let (to, note, verb) = match answer {
        Answer::Approve => (APPROVED, None, "approved"),
        Answer::Deny(reason) => (REJECTED, reason, "denied"),
    };
    let done = ledger
        .transition(Transition {
            id,
            from: PENDING,
            to,
            by: Some(name),
            at_ms: now,
            note,
        })
        .await
        .map_err(ledger_failed)?;
    if !done {
        return Err(settled_meanwhile(ledger, id).await);
    }
    Ok(match note {
        Some(reason) => format!(
            "{verb} {id} ({what}) as {name}: {}",
            escape_controls(reason)
        ),
        None => format!("{verb} {id} ({what}) as {name}"),
    })
}

/// The row left pending between reading and answering it (another approver, a timeout or the
/// caller's cancellation came first): says how it ended.
async fn settled_meanwhile(ledger: &StoreApprovals, id: &str) -> Failure {
    match ledger.get(id).await {
        Ok(Some(row)) => not_pending(&row),
        Ok(None) => unknown(ledger, id),
        Err(e) => ledger_failed(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(approvers: &[&str]) -> LedgerEntry {
        LedgerEntry {
            id: "apr_1".to_owned(),
            state: PENDING.to_owned(),
            caller: Some("alice".to_owned()),
            server: "fs".to_owned(),
            tool: "rm".to_owned(),
            arguments_sha256: String::new(),
            definition_sha256: String::new(),
            arguments_json: None,
            approvers: approvers.iter().map(|a| (*a).to_owned()).collect(),
            channel: "out_of_band".to_owned(),
            rule: "rules[0]".to_owned(),
            holder: "h:1".to_owned(),
            created_at_ms: 0,
            expires_at_ms: 0,
            answered_by: None,
            answered_at_ms: None,
            note: None,
        }
    }

    fn refusal(r: Result<(), Failure>) -> String {
        match r {
            Err(Failure::Refused(e)) => e.message,
            Err(Failure::Failed(e)) => format!("failed: {}", e.message),
            Ok(()) => "allowed".to_owned(),
        }
    }

    #[test]
    fn an_anonymous_callers_question_under_caller_is_answered_by_whoever_runs_the_command() {
        let mut anonymous = row(&["caller"]);
        anonymous.caller = None;
        assert!(may_answer(&anonymous, "operator", &[]).is_ok());
        let mut others_only = row(&["identity:bob"]);
        others_only.caller = None;
        assert!(may_answer(&others_only, "operator", &[]).is_err());
    }

    #[test]
    fn who_may_answer_follows_the_approvers() {
        let ops = ["ops".to_owned()];
        assert_eq!(
            refusal(may_answer(&row(&["identity:bob"]), "bob", &[])),
            "allowed"
        );
        assert_eq!(
            refusal(may_answer(&row(&["group:ops"]), "dana", &ops)),
            "allowed"
        );
        assert_eq!(
            refusal(may_answer(&row(&["caller"]), "alice", &[])),
            "allowed"
        );
        assert!(refusal(may_answer(&row(&["caller"]), "bob", &[])).contains("bob may not answer"));
        assert_eq!(
            refusal(may_answer(&row(&["caller", "group:ops"]), "alice", &[])),
            "allowed"
        );
        let own = refusal(may_answer(
            &row(&["group:ops", "identity:alice"]),
            "alice",
            &ops,
        ));
        assert!(
            own.contains("a caller may not approve their own call under this rule"),
            "{own}"
        );
        let other = refusal(may_answer(&row(&["group:ops"]), "eve", &["dev".to_owned()]));
        assert!(
            other.contains("eve may not answer") && !other.contains("own call"),
            "{other}"
        );
    }

    #[test]
    fn spans_and_cells_read_as_people_expect() {
        assert_eq!(span(45_000), "45s");
        assert_eq!(span(125_000), "2m");
        assert_eq!(span(7_200_000), "2h");
        assert_eq!(span(2 * 86_400_000), "2d");
        assert_eq!(span(-5), "0s");
        assert_eq!(cell("a\u{1b}[31m"), "a\\u{1b}[31m");
        assert_eq!(cell(""), "-");
        assert_eq!(
            cell(&"x".repeat(MAX_CELL_CHARS + 5)).chars().count(),
            MAX_CELL_CHARS
        );
    }
}
