//! `manifold audit verify|tail|search|export`: the operator's side of the audit trail.
//!
//! The gateway appends one row per call to the store (SQLite in the data directory, or
//! PostgreSQL), chained by SHA-256. These commands read it from the same configuration, beside a
//! running gateway (the store is opened as `manifold keys` opens it): `verify` walks the chain,
//! `tail` and `search` show rows to a person (or as JSON lines), `export` writes every row with
//! its hashes so the chain can be checked offline, away from the store that holds it. All of
//! them read a page of rows at a time, so a trail of any length costs one page of memory.

use manifold_store::timestamps::now_ms;
use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

use clap::Subcommand;
use manifold_config::duration::{DurationError, parse_duration_up_to};
use manifold_config::{Config, MAX_AUDIT_RETENTION};
use manifold_store::{
    AUDIT_GENESIS, AuditFilter, AuditRow, MAX_AUDIT_PAGE, PruneAnchor, SQLITE_FILE_NAME, Store,
    StoreError, VerifyReport,
};
use manifold_telemetry::audit::AuditOutcome;
use serde_json::{Map, Value, json};

use crate::key_store;
use crate::report::{CliError, Outcome};
use manifold_store::timestamps::{parse_rfc3339_ms, utc_rfc3339};

/// How often `tail --follow` asks the store for rows after the last one shown: new rows show
/// within half a second, and an idle trail costs two small queries a second.
pub const FOLLOW_POLL: Duration = Duration::from_millis(500);
/// Rows `tail` shows when `-n` is not given.
pub const DEFAULT_TAIL_ROWS: u32 = 20;
/// Rows `search` shows when `--limit` is not given.
pub const DEFAULT_SEARCH_ROWS: u32 = 50;
/// Most rows `tail -n` or `search --limit` shows: one page of the store (`export` has no bound).
pub const MAX_ROWS_SHOWN: u32 = MAX_AUDIT_PAGE;
/// Furthest back a duration `--since 7d` may reach: the longest the trail keeps rows.
pub const MAX_LOOKBACK: Duration = MAX_AUDIT_RETENTION;
/// Widest a table cell is shown, in characters; longer ones (a long URI) end in `…`. `--json`
/// has them whole.
pub const MAX_CELL_CHARS: usize = 64;

const MS_PER_SECOND: i64 = 1000;
const SECONDS_PER_DAY: u64 = 86_400;

#[derive(Debug, Subcommand)]
pub enum AuditAction {
    /// Check the audit trail's hash chain from its start (or its pruning anchor) to its newest row; exit 1 naming the first broken row.
    Verify {
        /// The configuration file, for its store (default: $MANIFOLD_CONFIG, else ./manifold.toml or ~/.config/manifold/manifold.toml if present).
        #[arg(long, short = 'c')]
        config: Option<PathBuf>,
    },
    /// Show the newest rows, oldest first; with --follow, keep printing new rows as they arrive until interrupted.
    Tail {
        /// How many of the newest rows to show (0 with --follow: only rows that arrive from now on).
        #[arg(short = 'n', long = "lines", value_name = "N", default_value_t = DEFAULT_TAIL_ROWS)]
        rows: u32,
        /// Keep running and print each new row as it is written.
        #[arg(long, short = 'f')]
        follow: bool,
        /// One JSON object per line (the row's record plus its seq) instead of a table.
        #[arg(long)]
        json: bool,
        /// The configuration file, for its store (default: $MANIFOLD_CONFIG, else ./manifold.toml or ~/.config/manifold/manifold.toml if present).
        #[arg(long, short = 'c')]
        config: Option<PathBuf>,
    },
    /// Find rows by caller, tool, server, outcome and time, newest first.
    Search {
        /// Only calls by this principal (an API key's name, a token's subject, or `anonymous`).
        #[arg(long, value_name = "PRINCIPAL")]
        caller: Option<String>,
        /// Only calls to this tool (or reads of this URI, gets of this prompt).
        #[arg(long, alias = "target", value_name = "NAME")]
        tool: Option<String>,
        /// Only calls to this server (its configured name; `manifold` for built-in tools).
        #[arg(long, value_name = "NAME")]
        server: Option<String>,
        /// Only calls that ended so: ok, tool_error, rpc_error, transport_failure, refused_by_policy, rate_limited, cancelled, input_required, audit_unavailable.
        #[arg(long, value_name = "OUTCOME")]
        outcome: Option<String>,
        /// Only rows at or after this time: RFC 3339 (2026-12-01T09:30:00Z, 2026-12-01) or a duration ago (30m, 1h, 7d).
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
        /// Only rows before this time: RFC 3339 or a duration ago.
        #[arg(long, value_name = "TIME")]
        until: Option<String>,
        /// Only rows older than this seq (the SEQ column): the next page of a search is the same search with --before the smallest seq it showed.
        #[arg(long, value_name = "SEQ")]
        before: Option<i64>,
        /// Most rows to show.
        #[arg(long, value_name = "N", default_value_t = DEFAULT_SEARCH_ROWS)]
        limit: u32,
        /// One JSON object per line (the row's record plus its seq) instead of a table.
        #[arg(long)]
        json: bool,
        /// The configuration file, for its store (default: $MANIFOLD_CONFIG, else ./manifold.toml or ~/.config/manifold/manifold.toml if present).
        #[arg(long, short = 'c')]
        config: Option<PathBuf>,
    },
    /// Write every row, oldest first, with its seq and hashes, one JSON object per line on stdout (verifiable offline: docs/operations.md).
    Export {
        /// JSON lines: {"prev_sha256","record_json","row_sha256","seq"} per row (the only format, named so that others can follow).
        #[arg(long, required = true)]
        jsonl: bool,
        /// Only rows at or after this time: RFC 3339 or a duration ago.
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
        /// Only rows before this time: RFC 3339 or a duration ago.
        #[arg(long, value_name = "TIME")]
        until: Option<String>,
        /// The configuration file, for its store (default: $MANIFOLD_CONFIG, else ./manifold.toml or ~/.config/manifold/manifold.toml if present).
        #[arg(long, short = 'c')]
        config: Option<PathBuf>,
    },
}

/// A command with its flags checked, ready to run against the store.
#[derive(Debug, PartialEq, Eq)]
enum Job {
    Verify,
    Tail {
        rows: u32,
        follow: bool,
        json: bool,
    },
    Search {
        filter: AuditFilter,
        limit: u32,
        json: bool,
    },
    Export {
        since_ms: Option<i64>,
        until_ms: Option<i64>,
    },
}

/// `manifold audit ...`.
pub async fn run(action: &AuditAction) -> Result<Outcome, CliError> {
    let given = match action {
        AuditAction::Verify { config }
        | AuditAction::Tail { config, .. }
        | AuditAction::Search { config, .. }
        | AuditAction::Export { config, .. } => config.as_deref(),
    };
    // Flags first: a mistyped outcome or time costs no store open.
    let job = prepare(action, now_ms())?;
    let config = crate::config_file::load_config(given)?;
    check_store_exists(&config)?;
    let store = key_store::open_for_command(&config).await?;
    let outcome = match job {
        Job::Verify => verify(&store, &config).await,
        Job::Tail { rows, follow, json } => tail(&store, rows, follow, json).await,
        Job::Search {
            filter,
            limit,
            json,
        } => search(&store, &config, &filter, limit, json).await,
        Job::Export { since_ms, until_ms } => export(&store, since_ms, until_ms).await,
    };
    key_store::close(store).await;
    outcome
}

/// These commands only read: a data directory without a store means a wrong `--config` or
/// `data_dir`, and opening would create an empty store there that "verifies" as intact.
fn check_store_exists(config: &Config) -> Result<(), CliError> {
    if config.store.url.is_some() {
        return Ok(());
    }
    let file = config.gateway.data_dir.join(SQLITE_FILE_NAME);
    if file.exists() {
        return Ok(());
    }
    Err(CliError::with_hint(
        format!(
            "there is no store at {}, so no audit trail to read",
            file.display()
        ),
        format!(
            "a gateway creates it when it first starts with this configuration ({}); check --config, [gateway] data_dir, and [store] url if the gateway uses PostgreSQL",
            config.origin
        ),
    ))
}

fn prepare(action: &AuditAction, now_ms: i64) -> Result<Job, CliError> {
    match action {
        AuditAction::Verify { .. } => Ok(Job::Verify),
        AuditAction::Tail {
            rows, follow, json, ..
        } => {
            check_rows("-n", *rows, 0)?;
            Ok(Job::Tail {
                rows: *rows,
                follow: *follow,
                json: *json,
            })
        }
        AuditAction::Search {
            caller,
            tool,
            server,
            outcome,
            since,
            until,
            before,
            limit,
            json,
            ..
        } => {
            check_rows("--limit", *limit, 1)?;
            if let Some(before) = before
                && *before < 1
            {
                return Err(CliError::usage(format!(
                    "--before {before} matches no row: seqs start at 1; give the smallest SEQ a search showed to see the rows before it"
                )));
            }
            if let Some(outcome) = outcome {
                check_outcome(outcome)?;
            }
            let (since_ms, until_ms) = time_range(since.as_deref(), until.as_deref(), now_ms)?;
            Ok(Job::Search {
                filter: AuditFilter {
                    principal: caller.clone(),
                    server: server.clone(),
                    target: tool.clone(),
                    outcome: outcome.clone(),
                    since_ms,
                    until_ms,
                    before_seq: *before,
                },
                limit: *limit,
                json: *json,
            })
        }
        AuditAction::Export { since, until, .. } => {
            let (since_ms, until_ms) = time_range(since.as_deref(), until.as_deref(), now_ms)?;
            Ok(Job::Export { since_ms, until_ms })
        }
    }
}

fn check_rows(flag: &str, rows: u32, least: u32) -> Result<(), CliError> {
    if rows > MAX_ROWS_SHOWN {
        return Err(CliError::with_hint(
            format!(
                "{flag} {rows} is more than the {MAX_ROWS_SHOWN} rows one command shows (one page of the store)"
            ),
            "narrow the rows with `manifold audit search` (--caller, --tool, --since ...), or write them all with `manifold audit export --jsonl`",
        ));
    }
    if rows < least {
        return Err(CliError::usage(format!(
            "{flag} {rows} shows nothing; give at least {least}"
        )));
    }
    Ok(())
}

fn check_outcome(given: &str) -> Result<(), CliError> {
    if AuditOutcome::ALL.iter().any(|o| o.as_str() == given) {
        return Ok(());
    }
    let valid: Vec<&str> = AuditOutcome::ALL.iter().map(|o| o.as_str()).collect();
    Err(CliError::with_hint(
        format!("--outcome {given:?} is not an outcome the audit trail records"),
        format!("use one of: {}", valid.join(", ")),
    ))
}

fn time_range(
    since: Option<&str>,
    until: Option<&str>,
    now_ms: i64,
) -> Result<(Option<i64>, Option<i64>), CliError> {
    let since_ms = since
        .map(|t| parse_time("--since", t, now_ms))
        .transpose()?;
    let until_ms = until
        .map(|t| parse_time("--until", t, now_ms))
        .transpose()?;
    if let (Some(since_ms), Some(until_ms)) = (since_ms, until_ms)
        && since_ms >= until_ms
    {
        return Err(CliError::with_hint(
            format!(
                "--since {} is not before --until {}: no row can match",
                shown_ms(since_ms),
                shown_ms(until_ms)
            ),
            "swap them: --since takes the earlier time",
        ));
    }
    Ok((since_ms, until_ms))
}

/// Milliseconds since the Unix epoch of an RFC 3339 time, or of now minus a duration.
fn parse_time(flag: &str, text: &str, now_ms: i64) -> Result<i64, CliError> {
    if let Some(ms) = parse_rfc3339_ms(text) {
        return Ok(ms);
    }
    let max_days = MAX_LOOKBACK.as_secs() / SECONDS_PER_DAY;
    let example = format!(
        "write e.g. {flag} 2026-12-01T09:30:00Z (RFC 3339, UTC or with an offset), {flag} 2026-12-01, or a duration ago: {flag} 30m, 1h, 7d (at most {max_days}d)"
    );
    match parse_duration_up_to(text, MAX_LOOKBACK) {
        Ok(ago) => {
            let ago_ms = i64::try_from(ago.as_millis()).unwrap_or(i64::MAX);
            Ok(now_ms.saturating_sub(ago_ms))
        }
        Err(DurationError::TooLong) => Err(CliError::with_hint(
            format!(
                "{flag} {text:?} reaches back more than {max_days} days, longer than the audit trail keeps rows"
            ),
            format!("leave {flag} out to include every row, or {example}"),
        )),
        Err(_) => Err(CliError::with_hint(
            format!("{flag} {text:?} is neither an RFC 3339 time nor a duration ago"),
            example,
        )),
    }
}

/// A store time as people read it (whole seconds, UTC).
pub(crate) fn shown_ms(ms: i64) -> String {
    utc_rfc3339(u64::try_from(ms.div_euclid(MS_PER_SECOND)).unwrap_or(0))
}

fn store_failed(store: &Store, e: &StoreError) -> CliError {
    CliError::with_hint(
        format!("could not read the audit trail: {e}"),
        format!(
            "the audit trail lives in the store at {}; check that it is the one the gateway uses ([store] url, or store.sqlite in gateway.data_dir)",
            store.location().shown()
        ),
    )
}

// ---- verify ----

async fn verify(store: &Store, config: &Config) -> Result<Outcome, CliError> {
    let report = store
        .audit()
        .verify()
        .await
        .map_err(|e| store_failed(store, &e))?;
    if !config.audit.enabled && report.rows_checked == 0 {
        eprintln!(
            "note: {} sets [audit] enabled = false, so the gateway writes no audit rows",
            config.origin
        );
    }
    print!("{}", describe_verify(&report, &store.location().shown()));
    match &report.first_broken {
        None => Ok(Outcome::Success),
        Some((seq, what)) => Err(CliError::with_hint(
            format!("the audit trail is broken at seq {seq}: {what}"),
            "the rows from there on were changed outside Manifold (by SQL, or on disk); keep the store as it is for the investigation, and compare it with an earlier `manifold audit export --jsonl`, which verifies offline (docs/operations.md)",
        )),
    }
}

/// What `verify` prints on stdout: what was checked and, for an intact trail, that it is.
pub(crate) fn describe_verify(report: &VerifyReport, location: &str) -> String {
    let mut out = match (report.first_row, report.last_row) {
        (Some(first), Some(last)) => format!(
            "checked {} rows of the audit trail in {location} (seq {first} to {last})\n",
            report.rows_checked
        ),
        _ => format!("the audit trail in {location} holds no rows\n"),
    };
    if let Some(pruned) = &report.pruned {
        out.push_str(&describe_prune(pruned));
        out.push('\n');
    }
    if report.is_intact() {
        out.push_str("the audit trail is intact\n");
    }
    out
}

fn describe_prune(p: &PruneAnchor) -> String {
    format!(
        "rows 1..{} were pruned (the latest prune, on {}, removed {} of them); the chain starts from their anchor {}",
        p.through_seq,
        shown_ms(p.pruned_at_ms),
        p.rows,
        p.anchor_sha256
    )
}

// ---- tail and search ----

async fn tail(store: &Store, rows: u32, follow: bool, json: bool) -> Result<Outcome, CliError> {
    let trail = store.audit();
    let newest = trail
        .search(&AuditFilter::default(), rows)
        .await
        .map_err(|e| store_failed(store, &e))?;
    let mut after = match newest.first() {
        Some(row) => row.seq,
        None => trail
            .head()
            .await
            .map_err(|e| store_failed(store, &e))?
            .map_or(0, |(seq, _)| seq),
    };
    if newest.is_empty() && !follow {
        eprintln!(
            "the audit trail in {} holds no rows yet",
            store.location().shown()
        );
        return Ok(Outcome::Success);
    }
    let oldest_first: Vec<&AuditRow> = newest.iter().rev().collect();
    let cells: Vec<Cells> = oldest_first.iter().map(|r| row_cells(r)).collect();
    let table = Table::fitting(&cells);
    let mut lines = Vec::with_capacity(oldest_first.len() + 1);
    if !json {
        lines.push(table.header());
    }
    lines.extend(oldest_first.iter().zip(&cells).map(|(row, cells)| {
        if json {
            record_line(row)
        } else {
            table.line(cells)
        }
    }));
    if write_lines(&lines)? == Flow::Stopped || !follow {
        return Ok(Outcome::Success);
    }
    // Set while the store does not answer: said once when it starts and once when it ends, so
    // a restart of PostgreSQL under a running `tail -f` is a pause, not the end of the command.
    let mut unreadable: Option<String> = None;
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => return Ok(Outcome::Success),
            () = tokio::time::sleep(FOLLOW_POLL) => {}
        }
        // Catch up a page at a time when rows come faster than one page per poll.
        loop {
            let rows = match trail.page(after, MAX_AUDIT_PAGE).await {
                Ok(rows) => rows,
                Err(e) => {
                    let why = e.to_string();
                    if unreadable.as_deref() != Some(why.as_str()) {
                        eprintln!(
                            "could not read the audit trail in {}: {why}; trying again every {} ms until it answers (Ctrl-C to stop)",
                            store.location().shown(),
                            FOLLOW_POLL.as_millis()
                        );
                        unreadable = Some(why);
                    }
                    break;
                }
            };
            if unreadable.take().is_some() {
                eprintln!(
                    "reading the audit trail in {} again",
                    store.location().shown()
                );
            }
            let Some(last) = rows.last() else { break };
            after = last.seq;
            let lines: Vec<String> = rows
                .iter()
                .map(|row| {
                    if json {
                        record_line(row)
                    } else {
                        table.line(&row_cells(row))
                    }
                })
                .collect();
            if write_lines(&lines)? == Flow::Stopped {
                return Ok(Outcome::Success);
            }
            if rows.len() < usize::try_from(MAX_AUDIT_PAGE).unwrap_or(usize::MAX) {
                break;
            }
        }
    }
}

async fn search(
    store: &Store,
    config: &Config,
    filter: &AuditFilter,
    limit: u32,
    json: bool,
) -> Result<Outcome, CliError> {
    let mut rows = search_rows(store, filter, limit).await?;
    // A name as clients see it: the trail has what the server was asked.
    let clients_name = (filter.target.as_deref())
        .and_then(|target| clients_names::server_and_name(target, config))
        .filter(|(server, _)| filter.server.as_ref().is_none_or(|s| s == server));
    if rows.is_empty()
        && let Some((server, name)) = clients_name
    {
        let given = filter.target.as_deref().unwrap_or_default();
        eprintln!(
            "{given} is {server:?}'s {name:?} as clients see it; the trail names what the server was asked, so showing --server {server} --tool {name}"
        );
        let filter = AuditFilter {
            server: Some(server),
            target: Some(name),
            ..filter.clone()
        };
        rows = search_rows(store, &filter, limit).await?;
    }
    if rows.is_empty() {
        eprintln!("no audit rows in {} match", store.location().shown());
        return Ok(Outcome::Success);
    }
    let lines: Vec<String> = if json {
        rows.iter().map(record_line).collect()
    } else {
        let cells: Vec<Cells> = rows.iter().map(row_cells).collect();
        let table = Table::fitting(&cells);
        std::iter::once(table.header())
            .chain(cells.iter().map(|c| table.line(c)))
            .collect()
    };
    if write_lines(&lines)? == Flow::Stopped {
        return Ok(Outcome::Success);
    }
    if rows.len() == usize::try_from(limit).unwrap_or(usize::MAX)
        && let Some(oldest) = rows.last()
    {
        eprintln!(
            "showing the newest {limit} matching rows; there may be more: run the same search with --before {} for the next page, or narrow it (--since, --until ...)",
            oldest.seq
        );
    }
    Ok(Outcome::Success)
}

async fn search_rows(
    store: &Store,
    filter: &AuditFilter,
    limit: u32,
) -> Result<Vec<AuditRow>, CliError> {
    (store.audit().search(filter, limit).await).map_err(|e| store_failed(store, &e))
}

/// One row as a JSON line: its record, with its `seq` added.
pub(crate) fn record_line(row: &AuditRow) -> String {
    match serde_json::from_str::<Map<String, Value>>(&row.entry.record_json) {
        Ok(mut record) => {
            record.insert("seq".to_owned(), json!(row.seq));
            Value::Object(record).to_string()
        }
        // A record that is not an object was edited by hand; show it as stored.
        Err(_) => json!({"seq": row.seq, "record_json": row.entry.record_json}).to_string(),
    }
}

const COLUMNS: usize = 8;
type Cells = [String; COLUMNS];
const HEADER: [&str; COLUMNS] = [
    "TIME (UTC)",
    "SEQ",
    "CALLER",
    "SERVER",
    "TARGET",
    "OUTCOME",
    "DURATION",
    "CALL ID",
];

fn row_cells(row: &AuditRow) -> Cells {
    let record = serde_json::from_str::<Value>(&row.entry.record_json).unwrap_or(Value::Null);
    let duration = record
        .get("duration_us")
        .and_then(Value::as_u64)
        .map_or_else(|| "-".to_owned(), shown_duration);
    [
        shown_ms(row.entry.at_ms),
        row.seq.to_string(),
        cell(&row.entry.principal),
        cell(&row.entry.server),
        cell(&row.entry.target),
        cell(&row.entry.outcome),
        duration,
        cell(&row.entry.call_id),
    ]
}

/// A stored text as a table cell: control characters escaped (a target or caller name comes
/// from a client, and must not move the operator's cursor or recolour the terminal), at most
/// [`MAX_CELL_CHARS`] wide, `-` when empty.
fn cell(text: &str) -> String {
    if text.is_empty() {
        return "-".to_owned();
    }
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            escaped.extend(c.escape_default());
        } else {
            escaped.push(c);
        }
    }
    if escaped.chars().count() <= MAX_CELL_CHARS {
        return escaped;
    }
    let mut cut: String = escaped.chars().take(MAX_CELL_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// Microseconds as people read a call's duration: `850us`, `12.3ms`, `4.20s`.
pub(crate) fn shown_duration(us: u64) -> String {
    const US_PER_MS: u64 = 1000;
    const US_PER_S: u64 = 1_000_000;
    if us < US_PER_MS {
        format!("{us}us")
    } else if us < US_PER_S {
        format!("{}.{}ms", us / US_PER_MS, us % US_PER_MS / 100)
    } else {
        format!("{}.{:02}s", us / US_PER_S, us % US_PER_S / 10_000)
    }
}

/// Column widths fitted to the header and the rows shown first; rows that `tail --follow`
/// prints later keep them (a wider cell pushes its line out rather than reflowing the table).
struct Table {
    widths: [usize; COLUMNS],
}

impl Table {
    fn fitting(rows: &[Cells]) -> Table {
        let mut widths = HEADER.map(|h| h.chars().count());
        for row in rows {
            for (w, c) in widths.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count());
            }
        }
        Table { widths }
    }

    fn header(&self) -> String {
        self.line(&HEADER.map(str::to_owned))
    }

    fn line(&self, cells: &Cells) -> String {
        let padded: Vec<String> = cells
            .iter()
            .zip(self.widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_owned()
    }
}

/// Whether stdout still takes lines.
#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Open,
    /// The reader went away (`| head`): stop quietly, as other command-line tools do.
    Stopped,
}

/// Writes `lines` to stdout and flushes them, so `tail --follow` shows each row as it comes.
fn write_lines(lines: &[String]) -> Result<Flow, CliError> {
    let mut out = io::stdout().lock();
    let written = lines
        .iter()
        .try_for_each(|line| writeln!(out, "{line}"))
        .and_then(|()| out.flush());
    match written {
        Ok(()) => Ok(Flow::Open),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(Flow::Stopped),
        Err(e) => Err(CliError::usage(format!(
            "could not write audit rows to stdout: {e}"
        ))),
    }
}

// ---- export ----

async fn export(
    store: &Store,
    since_ms: Option<i64>,
    until_ms: Option<i64>,
) -> Result<Outcome, CliError> {
    let trail = store.audit();
    let failed = |e: StoreError| store_failed(store, &e);
    // Rows appended while exporting are left for the next export, so the run ends.
    let Some((head_seq, _)) = trail.head().await.map_err(failed)? else {
        eprintln!(
            "the audit trail in {} holds no rows; nothing exported",
            store.location().shown()
        );
        return Ok(Outcome::Success);
    };
    let anchor = trail.anchor().await.map_err(failed)?;
    let in_range = |at_ms: i64| {
        since_ms.is_none_or(|since| at_ms >= since) && until_ms.is_none_or(|until| at_ms < until)
    };
    let mut summary = ExportSummary::default();
    let mut after = 0;
    loop {
        let rows = trail.page(after, MAX_AUDIT_PAGE).await.map_err(failed)?;
        let full_page = rows.len() == usize::try_from(MAX_AUDIT_PAGE).unwrap_or(usize::MAX);
        let mut lines = Vec::with_capacity(rows.len());
        let mut reached_head = false;
        for row in &rows {
            if row.seq > head_seq {
                reached_head = true;
                break;
            }
            after = row.seq;
            if in_range(row.entry.at_ms) {
                summary.count(row);
                lines.push(export_line(row));
            }
        }
        if write_lines(&lines)? == Flow::Stopped {
            return Ok(Outcome::Success);
        }
        if reached_head || !full_page {
            break;
        }
    }
    eprintln!(
        "{}",
        summary.describe(&store.location().shown(), anchor.as_ref())
    );
    Ok(Outcome::Success)
}

/// One row as `export --jsonl` writes it: `record_json` as the exact text the hash covers (a
/// re-serialised object could differ in a byte and no longer verify).
pub(crate) fn export_line(row: &AuditRow) -> String {
    json!({
        "seq": row.seq,
        "prev_sha256": row.prev_sha256,
        "row_sha256": row.row_sha256,
        "record_json": row.entry.record_json,
    })
    .to_string()
}

/// What an export wrote, for the line on stderr that says where its chain starts.
#[derive(Debug, Default)]
struct ExportSummary {
    rows: u64,
    first: Option<(i64, String)>,
    last_seq: Option<i64>,
}

impl ExportSummary {
    fn count(&mut self, row: &AuditRow) {
        self.rows += 1;
        self.first
            .get_or_insert_with(|| (row.seq, row.prev_sha256.clone()));
        self.last_seq = Some(row.seq);
    }

    fn describe(&self, location: &str, anchor: Option<&PruneAnchor>) -> String {
        let (Some((first, prev)), Some(last)) = (&self.first, self.last_seq) else {
            return format!("no audit rows in {location} are in that time range; nothing exported");
        };
        let starts = if prev == AUDIT_GENESIS {
            "its first row chains on the genesis (64 zeros)".to_owned()
        } else if let Some(a) = anchor.filter(|a| a.anchor_sha256 == *prev) {
            format!(
                "its first row chains on the anchor of the prune through seq {} ({})",
                a.through_seq, a.anchor_sha256
            )
        } else {
            format!("its first row chains on the row before it, not exported ({prev})")
        };
        format!(
            "exported {} audit rows (seq {first} to {last}) from {location}; {starts}",
            self.rows
        )
    }
}

mod clients_names;
#[cfg(test)]
mod tests;
