//! The tasks extension (`io.modelcontextprotocol/tasks`, modern era): long-running tool calls
//! that answer at once with a task id and are then observed with `tasks/get`, fed input with
//! `tasks/update`, and stopped with `tasks/cancel`.
//!
//! A task runs the same job code as an inline call; only where its input comes from differs: a
//! task that needs input parks in `input_required`, lists the questions on `tasks/get`, and goes on
//! when `tasks/update` has answered every one of them (answers may come one at a time).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use ring::rand::{SecureRandom, SystemRandom};
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::catalog::tools::{Job, run_job};
use crate::engine::Fixture;
use crate::error::RpcError;
use crate::interaction::{Answers, InputRequest, InputSource, Interaction, Interrupt};
use crate::log_level::LogPolicy;
use crate::mrtr::validate_answer;
use crate::outbox::Outbox;

/// The extension's identifier, as declared in capabilities.
pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// How long a task stays readable after it was created (ten minutes).
pub const TASK_TTL_MS: u64 = 10 * 60 * 1000;

/// How often a client should poll a task.
pub const POLL_INTERVAL_MS: u64 = 200;

/// The most tasks kept at once.
pub const MAX_TASKS: usize = 1024;

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl TaskStatus {
    pub const fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }
}

#[derive(Debug)]
struct TaskState {
    status: TaskStatus,
    last_updated_ms: u64,
    result: Option<Value>,
    error: Option<Value>,
    /// Questions not answered yet, by key.
    waiting: BTreeMap<String, InputRequest>,
    /// Answers received for the current round of questions.
    answers: Answers,
}

/// One task.
#[derive(Debug)]
pub struct TaskEntry {
    pub id: String,
    created_ms: u64,
    state: Mutex<TaskState>,
    version: watch::Sender<u64>,
    cancel: CancellationToken,
}

impl TaskEntry {
    fn lock(&self) -> MutexGuard<'_, TaskState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn touched(&self, state: &mut TaskState) {
        state.last_updated_ms = now_ms();
        self.version.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Parks the task until every one of `requests` is answered through `tasks/update`.
    pub async fn await_inputs(
        &self,
        requests: Vec<InputRequest>,
        cancel: &CancellationToken,
    ) -> Result<Answers, Interrupt> {
        let keys: Vec<String> = requests.iter().map(|r| r.key.clone()).collect();
        let mut changes = self.version.subscribe();
        {
            let mut state = self.lock();
            if state.status.is_terminal() {
                return Err(Interrupt::Cancelled);
            }
            state.answers.clear();
            state.waiting = requests.into_iter().map(|r| (r.key.clone(), r)).collect();
            state.status = TaskStatus::InputRequired;
            self.touched(&mut state);
        }
        loop {
            {
                let mut state = self.lock();
                if state.status.is_terminal() {
                    return Err(Interrupt::Cancelled);
                }
                if state.waiting.is_empty() {
                    let mut answers = Answers::new();
                    for key in &keys {
                        if let Some(answer) = state.answers.remove(key) {
                            answers.insert(key.clone(), answer);
                        }
                    }
                    state.status = TaskStatus::Working;
                    self.touched(&mut state);
                    return Ok(answers);
                }
            }
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Err(Interrupt::Cancelled);
                    }
                }
                () = cancel.cancelled() => return Err(Interrupt::Cancelled),
            }
        }
    }

    /// The task as `tasks/get` reports it (a DetailedTask).
    pub fn detailed(&self) -> Value {
        let state = self.lock();
        let mut task = self.envelope(&state);
        task.insert("resultType".to_owned(), json!("complete"));
        match state.status {
            TaskStatus::InputRequired => {
                let requests: Map<String, Value> = state
                    .waiting
                    .iter()
                    .map(|(k, r)| (k.clone(), r.to_value()))
                    .collect();
                task.insert("inputRequests".to_owned(), Value::Object(requests));
            }
            TaskStatus::Completed => {
                if let Some(result) = &state.result {
                    task.insert("result".to_owned(), result.clone());
                }
            }
            TaskStatus::Failed => {
                if let Some(error) = &state.error {
                    task.insert("error".to_owned(), error.clone());
                }
            }
            TaskStatus::Working | TaskStatus::Cancelled => {}
        }
        Value::Object(task)
    }

    /// The `CreateTaskResult` answering the call that created the task.
    pub fn created(&self) -> Value {
        let state = self.lock();
        let mut task = self.envelope(&state);
        task.insert("resultType".to_owned(), json!("task"));
        Value::Object(task)
    }

    fn envelope(&self, state: &TaskState) -> Map<String, Value> {
        let mut task = Map::new();
        task.insert("taskId".to_owned(), json!(self.id));
        task.insert("status".to_owned(), json!(state.status.as_str()));
        task.insert("createdAt".to_owned(), json!(iso8601(self.created_ms)));
        task.insert(
            "lastUpdatedAt".to_owned(),
            json!(iso8601(state.last_updated_ms)),
        );
        task.insert("ttlMs".to_owned(), json!(TASK_TTL_MS));
        task.insert("pollIntervalMs".to_owned(), json!(POLL_INTERVAL_MS));
        task
    }

    fn settle(&self, outcome: Result<Value, Interrupt>) {
        let mut state = self.lock();
        if state.status.is_terminal() {
            return;
        }
        state.waiting.clear();
        match outcome {
            Ok(mut result) => {
                if let Some(obj) = result.as_object_mut() {
                    obj.insert("resultType".to_owned(), json!("complete"));
                }
                state.status = TaskStatus::Completed;
                state.result = Some(result);
            }
            Err(Interrupt::Failed(error)) => {
                state.status = TaskStatus::Failed;
                state.error = Some(error.to_value());
            }
            Err(Interrupt::NeedInput(_)) => {
                state.status = TaskStatus::Failed;
                state.error = Some(
                    RpcError::internal("the task asked for input outside tasks/update").to_value(),
                );
            }
            Err(Interrupt::Cancelled) => state.status = TaskStatus::Cancelled,
        }
        self.touched(&mut state);
    }

    fn cancel(&self) {
        let mut state = self.lock();
        if !state.status.is_terminal() {
            state.status = TaskStatus::Cancelled;
            state.waiting.clear();
            self.touched(&mut state);
        }
        drop(state);
        self.cancel.cancel();
    }

    fn expired(&self, now: u64) -> bool {
        now.saturating_sub(self.created_ms) > TASK_TTL_MS
    }
}

/// Every task of the process.
pub struct TaskStore {
    tasks: Mutex<HashMap<String, Arc<TaskEntry>>>,
    rng: SystemRandom,
}

impl Default for TaskStore {
    fn default() -> Self {
        TaskStore {
            tasks: Mutex::new(HashMap::new()),
            rng: SystemRandom::new(),
        }
    }
}

impl TaskStore {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<TaskEntry>>> {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Creates a task running `job` and returns it once `tasks/get` can already find it.
    pub fn create(
        &self,
        fixture: &Arc<Fixture>,
        job: Job,
        client_capabilities: Value,
    ) -> Result<Arc<TaskEntry>, RpcError> {
        let now = now_ms();
        let entry = Arc::new(TaskEntry {
            id: self.new_id(),
            created_ms: now,
            state: Mutex::new(TaskState {
                status: TaskStatus::Working,
                last_updated_ms: now,
                result: None,
                error: None,
                waiting: BTreeMap::new(),
                answers: Answers::new(),
            }),
            version: watch::channel(0).0,
            cancel: CancellationToken::new(),
        });
        {
            let mut tasks = self.lock();
            tasks.retain(|_, t| {
                let keep = !t.expired(now);
                if !keep {
                    t.cancel();
                }
                keep
            });
            if tasks.len() >= MAX_TASKS {
                let oldest_done = tasks
                    .values()
                    .filter(|t| t.lock().status.is_terminal())
                    .min_by_key(|t| t.created_ms)
                    .map(|t| t.id.clone());
                match oldest_done {
                    Some(id) => {
                        tasks.remove(&id);
                    }
                    None => {
                        return Err(RpcError::internal(format!(
                            "{MAX_TASKS} tasks are still running; cancel some and retry"
                        )));
                    }
                }
            }
            tasks.insert(entry.id.clone(), entry.clone());
        }
        let mut interaction = Interaction {
            fixture: fixture.clone(),
            out: Outbox::detached(),
            inputs: InputSource::Task(entry.clone()),
            client_capabilities,
            log: LogPolicy::Silent,
            progress_token: None,
            cancel: entry.cancel.clone(),
        };
        let worker = entry.clone();
        tokio::spawn(async move {
            let outcome = tokio::select! {
                outcome = run_job(&job, &mut interaction) => outcome,
                () = worker.cancel.cancelled() => Err(Interrupt::Cancelled),
            };
            worker.settle(outcome);
        });
        Ok(entry)
    }

    /// The task `id`, unless unknown or expired (`-32602`).
    pub fn get(&self, id: &str) -> Result<Arc<TaskEntry>, RpcError> {
        let now = now_ms();
        self.lock()
            .get(id)
            .filter(|t| !t.expired(now))
            .cloned()
            .ok_or_else(|| {
                RpcError::invalid_params(format!(
                    "no task with id {id:?} (unknown, or expired after {TASK_TTL_MS} ms)"
                ))
                .with_data(json!({ "taskId": id }))
            })
    }

    /// Delivers answers; keys the task is not waiting for are ignored.
    pub fn update(&self, id: &str, responses: &Map<String, Value>) -> Result<(), RpcError> {
        let task = self.get(id)?;
        let mut state = task.lock();
        for (key, answer) in responses {
            if let Some(request) = state.waiting.get(key) {
                validate_answer(request, answer)?;
            }
        }
        let mut answered = false;
        for (key, answer) in responses {
            if state.waiting.remove(key).is_some() {
                state.answers.insert(key.clone(), answer.clone());
                answered = true;
            }
        }
        if answered {
            task.touched(&mut state);
        }
        Ok(())
    }

    /// Cancels the task; cancelling a finished task changes nothing and is not an error.
    pub fn cancel(&self, id: &str) -> Result<(), RpcError> {
        self.get(id)?.cancel();
        Ok(())
    }

    fn new_id(&self) -> String {
        let mut bytes = [0u8; 16];
        if self.rng.fill(&mut bytes).is_err() {
            // Uniqueness, not secrecy, is what an id needs; fall back to the clock.
            bytes = u128::from(now_ms()).to_be_bytes();
        }
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// `ms` since the Unix epoch as an ISO 8601 UTC timestamp with milliseconds.
pub fn iso8601(ms: u64) -> String {
    let secs = ms / 1000;
    let millis = ms % 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let of_day = secs % 86_400;
    let (hour, minute, second) = (of_day / 3600, (of_day % 3600) / 60, of_day % 60);
    // Days to a civil date (proleptic Gregorian), after H. Hinnant's algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{millis:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_iso_8601() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(iso8601(1_798_761_599_000), "2026-12-31T23:59:59.000Z");
    }
}
