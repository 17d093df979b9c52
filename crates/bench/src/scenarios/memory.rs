//! Why: scenario 4 asks what an idle legacy session costs a gateway in resident memory, and how
//! many sessions it holds before something fails. Each contender runs alone (so its RSS is its
//! own), sessions are opened with `initialize` + `notifications/initialized` and kept, RSS is
//! read at checkpoints, and a sample of the sessions is called at the end to prove they are held.
//! Guards stop the climb before the shared machine runs out of memory or process ids.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::client::{Connection, Endpoint, Era, Prepared, Session};
use crate::contenders::{Contender, Kind, Launcher, Upstream};
use crate::process_metrics::{descendants_rss, machine_memory, machine_processes, rss_bytes};
use crate::report::{Cell, Column, Row, Status, column};
use crate::scenarios::{Plan, SMALL_MESSAGE};

pub const CASE: &str = "legacy sessions";
/// Connections opening sessions at once.
const OPENERS: usize = 16;
/// Sessions called at the end to check they are still held.
const VERIFY_SAMPLE: usize = 20;
/// Pause before reading RSS, so allocations in flight settle.
const SETTLE: Duration = Duration::from_millis(500);
/// Pause before reading idle RSS: long enough for what a gateway does in its first seconds
/// besides answering (upstreams starting in the background, periodic polls running once), so
/// "idle" is what an idle gateway keeps, not a snapshot of its start.
const IDLE_SETTLE: Duration = Duration::from_secs(6);
const MIB: f64 = 1024.0 * 1024.0;

pub fn columns() -> Vec<Column> {
    vec![
        column("rss_idle_mib", "idle MiB"),
        column("rss_1k_mib", "1k MiB"),
        column("rss_10k_mib", "10k MiB"),
        column("bytes_per_session", "B/session"),
        column("tree_bytes_per_session", "B/session incl. children"),
        column("held", "held"),
        column("processes", "child procs"),
    ]
}

/// Why opening sessions stopped.
enum StageEnd {
    Reached,
    Failed(String),
    Guard(String),
    Budget,
}

struct Opener {
    endpoint: Endpoint,
    sessions: Mutex<Vec<Session>>,
    tickets: AtomicUsize,
    stop: AtomicBool,
    failure: Mutex<Option<String>>,
}

impl Opener {
    fn opened(&self) -> usize {
        lock(&self.sessions).len()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Most resident memory a contender's processes (it and its children) may hold: the machine is
/// shared, and a gateway that starts a process per session reaches it in a few thousand sessions.
const TREE_RSS_GUARD: u64 = 8 << 30;

/// A reason to stop before the machine is in trouble, if there is one.
fn machine_guard(pid: u32) -> Option<String> {
    let tree = rss_bytes(pid).unwrap_or(0) + descendants_rss(pid).0;
    if tree > TREE_RSS_GUARD {
        return Some(format!(
            "the gateway and its children hold {:.0} MiB (guard: {:.0} MiB)",
            tree as f64 / MIB,
            TREE_RSS_GUARD as f64 / MIB
        ));
    }
    if let Some((available, total)) = machine_memory() {
        let floor = (4u64 << 30).max(total / 4);
        if available < floor {
            return Some(format!(
                "the machine's available memory fell to {:.0} MiB (guard: {:.0} MiB)",
                available as f64 / MIB,
                floor as f64 / MIB
            ));
        }
    }
    let (processes, pid_max) = machine_processes();
    if processes > pid_max / 2 {
        return Some(format!(
            "{processes} processes on the machine (guard: half of pid_max {pid_max})"
        ));
    }
    None
}

async fn open_worker(opener: Arc<Opener>) {
    let mut connection = match Connection::open(&opener.endpoint).await {
        Ok(c) => c,
        Err(e) => {
            lock(&opener.failure).get_or_insert(e.to_string());
            opener.stop.store(true, Ordering::Relaxed);
            return;
        }
    };
    while !opener.stop.load(Ordering::Relaxed) {
        let took = opener
            .tickets
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok();
        if !took {
            return;
        }
        match Session::open(&mut connection, Era::Legacy).await {
            Ok(session) => lock(&opener.sessions).push(session),
            Err(e) => {
                let opened = opener.opened();
                lock(&opener.failure).get_or_insert(format!("after {opened} sessions: {e}"));
                opener.stop.store(true, Ordering::Relaxed);
                return;
            }
        }
    }
}

/// Opens sessions until `target` are open, or something stops it.
async fn open_until(
    opener: &Arc<Opener>,
    target: usize,
    deadline: Instant,
    gateway: &mut Contender,
) -> StageEnd {
    let missing = target.saturating_sub(opener.opened());
    if missing == 0 {
        return StageEnd::Reached;
    }
    opener.tickets.store(missing, Ordering::Relaxed);
    let mut workers = Vec::with_capacity(OPENERS);
    for _ in 0..OPENERS.min(missing) {
        workers.push(tokio::spawn(open_worker(opener.clone())));
    }
    let mut why_stopped = None;
    let pid = gateway.gateway_pid();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if workers.iter().all(|w| w.is_finished()) {
            break;
        }
        if why_stopped.is_none() {
            if let Some(guard) = machine_guard(pid) {
                why_stopped = Some(StageEnd::Guard(guard));
            } else if gateway.has_exited() {
                why_stopped = Some(StageEnd::Failed("the gateway process exited".to_owned()));
            } else if Instant::now() > deadline {
                why_stopped = Some(StageEnd::Budget);
            }
            if why_stopped.is_some() {
                opener.stop.store(true, Ordering::Relaxed);
            }
        }
    }
    for worker in workers {
        let _ = worker.await;
    }
    if let Some(failure) = lock(&opener.failure).clone() {
        return StageEnd::Failed(failure);
    }
    match why_stopped {
        Some(end) => end,
        None if opener.opened() >= target => StageEnd::Reached,
        None => StageEnd::Failed("opening stopped early".to_owned()),
    }
}

/// Calls the tool on a spread sample of the sessions; failures and the first error.
async fn verify(
    endpoint: &Endpoint,
    tool: &str,
    sessions: &[Session],
) -> (usize, usize, Option<String>) {
    let count = sessions.len();
    if count == 0 {
        return (0, 0, None);
    }
    let step = (count / VERIFY_SAMPLE).max(1);
    let mut checked = 0;
    let mut failed = 0;
    let mut first = None;
    for (n, session) in sessions
        .iter()
        .step_by(step)
        .take(VERIFY_SAMPLE)
        .enumerate()
    {
        checked += 1;
        let outcome = async {
            let prepared = Prepared::tools_call(session, tool, SMALL_MESSAGE)?;
            let mut connection = Connection::open(endpoint).await?;
            prepared.call(&mut connection, n as u64 + 1).await
        }
        .await;
        if let Err(e) = outcome {
            failed += 1;
            first.get_or_insert(e.to_string());
        }
    }
    (checked, failed, first)
}

/// Bytes per session from resident memory idle, at 1,000 and at 10,000 sessions: the larger of
/// the two slopes (idle -> 1k and 1k -> 10k), so that neither a fixed start-up cost (in the first)
/// nor sessions a gateway evicts or an allocator reuse (which flatten the second, even below zero)
/// hide what a session costs. Only the first slope when 10k was not reached.
fn bytes_per_session(idle: Option<u64>, one_k: Option<u64>, ten_k: Option<u64>) -> Option<f64> {
    let first = idle
        .zip(one_k)
        .map(|(r0, r1)| (r1 as f64 - r0 as f64) / 1_000.0);
    let second = one_k
        .zip(ten_k)
        .map(|(r1, r10)| (r10 as f64 - r1 as f64) / 9_000.0);
    match (first, second) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn mib(bytes: Option<u64>) -> Cell {
    Cell::maybe(bytes.map(|b| b as f64 / MIB))
}

pub async fn measure(launcher: &Launcher, kinds: &[Kind], plan: &Plan) -> (Vec<Row>, Vec<String>) {
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for kind in kinds {
        let mut contender = match launcher.start(*kind, Upstream::Stdio).await {
            Ok(c) => c,
            Err(e) => {
                rows.push(Row::failed(
                    CASE,
                    kind.name(),
                    format!("did not start: {e}"),
                ));
                continue;
            }
        };
        let (row, note) = measure_one(&mut contender, plan).await;
        rows.push(row);
        notes.extend(note);
        contender.stop().await;
    }
    (rows, notes)
}

async fn measure_one(contender: &mut Contender, plan: &Plan) -> (Row, Option<String>) {
    let kind = contender.kind;
    let pid = contender.gateway_pid();
    let mut row = Row::new(CASE, kind.name());
    tokio::time::sleep(IDLE_SETTLE).await;
    let idle = rss_bytes(pid);
    let (idle_tree, _) = descendants_rss(pid);
    row.set("rss_idle_mib", mib(idle));
    let opener = Arc::new(Opener {
        endpoint: contender.endpoint.clone(),
        sessions: Mutex::new(Vec::new()),
        tickets: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        failure: Mutex::new(None),
    });
    let deadline = Instant::now() + plan.memory_budget;
    let mut readings: Vec<(usize, Option<u64>, u64, usize)> = Vec::new();
    let mut end = StageEnd::Reached;
    let mut checkpoints: Vec<usize> = plan
        .memory_checkpoints
        .iter()
        .copied()
        .filter(|c| *c <= plan.memory_cap)
        .collect();
    if checkpoints.last() != Some(&plan.memory_cap) {
        checkpoints.push(plan.memory_cap);
    }
    for checkpoint in checkpoints {
        end = open_until(&opener, checkpoint, deadline, contender).await;
        tokio::time::sleep(SETTLE).await;
        let (tree, processes) = descendants_rss(pid);
        readings.push((opener.opened(), rss_bytes(pid), tree, processes));
        if !matches!(end, StageEnd::Reached) {
            break;
        }
    }
    let at = |n: usize| {
        readings
            .iter()
            .find(|(opened, ..)| *opened == n)
            .and_then(|(_, rss, tree, _)| rss.map(|r| (r, *tree)))
    };
    let one_k = at(1_000);
    let ten_k = at(10_000);
    row.set("rss_1k_mib", mib(one_k.map(|(r, _)| r)));
    row.set("rss_10k_mib", mib(ten_k.map(|(r, _)| r)));
    let per_session = bytes_per_session(idle, one_k.map(|(r, _)| r), ten_k.map(|(r, _)| r));
    let tree_per_session = bytes_per_session(
        idle.map(|r| r + idle_tree),
        one_k.map(|(r, t)| r + t),
        ten_k.map(|(r, t)| r + t),
    );
    row.set("bytes_per_session", Cell::maybe(per_session));
    row.set("tree_bytes_per_session", Cell::maybe(tree_per_session));
    if let Some((_, _, _, processes)) = readings.last() {
        row.set("processes", Cell::Int(*processes as u64));
    }
    let sessions = std::mem::take(&mut *lock(&opener.sessions));
    let held = sessions.len();
    let (checked, failed, first) = verify(&contender.endpoint, &contender.tool, &sessions).await;
    row.set("held", Cell::Int(held as u64));
    let limit = match &end {
        StageEnd::Reached => format!(
            "reached the cap of {} sessions without an error",
            plan.memory_cap
        ),
        StageEnd::Failed(e) => format!("an error stopped it at {held} sessions: {e}"),
        StageEnd::Guard(g) => format!("the machine guard stopped it at {held} sessions: {g}"),
        StageEnd::Budget => format!(
            "the time budget ({:?}) ran out at {held} sessions",
            plan.memory_budget
        ),
    };
    let mut note = limit;
    if failed > 0 {
        row.status = Status::Errors;
        note.push_str(&format!(
            "; {failed} of {checked} sampled sessions failed a call afterwards ({})",
            first.unwrap_or_default()
        ));
    } else {
        note.push_str(&format!(
            "; {checked} sampled sessions answered a call afterwards"
        ));
    }
    if matches!(end, StageEnd::Failed(_)) && held == 0 {
        row.status = Status::Failed;
    }
    row.note = Some(note);
    (row, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_per_session_takes_the_larger_slope() {
        let mib = |m: u64| m * 1024 * 1024;
        // Growing all the way: the 1k -> 10k slope leaves the start-up cost out.
        let grows = bytes_per_session(Some(mib(100)), Some(mib(160)), Some(mib(360)));
        assert_eq!(grows, Some(62_914.56));
        // Flat or shrinking past 1k (sessions evicted): the first slope still counts them.
        let evicts = bytes_per_session(Some(mib(21)), Some(mib(26)), Some(mib(25)));
        assert_eq!(evicts, Some(5_242.88));
        // 10k never reached: the first slope alone; nothing measured: nothing said.
        assert_eq!(
            bytes_per_session(Some(mib(1)), Some(mib(2)), None),
            Some(1_048.576)
        );
        assert_eq!(bytes_per_session(None, None, Some(mib(2))), None);
    }
}
