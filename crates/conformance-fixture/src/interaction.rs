//! The small vocabulary fixture primitives use to talk back while they run: ask the client for
//! input, log, report progress, pause, end the live stream, announce a change.
//!
//! A tool is written once against [`Interaction`]; how each word is carried out depends on the
//! era and on where the work runs. Asking for input, for instance, sends `elicitation/create` to a
//! legacy client and waits, answers from `inputResponses` (or returns `input_required`) for a
//! modern one, and parks a task in `input_required` until `tasks/update` brings the answers.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::client_requests::ClientRequests;
use crate::engine::Fixture;
use crate::error::RpcError;
use crate::log_level::{LogLevel, LogPolicy};
use crate::mrtr::{Replay, validate_answer};
use crate::outbox::{Outbox, Outgoing};
use crate::subscriptions::Change;
use crate::tasks::TaskEntry;

/// The logger name on every log message the fixture sends.
pub const LOGGER: &str = "conformance-fixture";

/// The methods a server may ask a client to carry out for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputMethod {
    Elicitation,
    Sampling,
    Roots,
}

impl InputMethod {
    pub const fn as_str(self) -> &'static str {
        match self {
            InputMethod::Elicitation => "elicitation/create",
            InputMethod::Sampling => "sampling/createMessage",
            InputMethod::Roots => "roots/list",
        }
    }

    /// The client capability the method needs.
    pub const fn capability(self) -> &'static str {
        match self {
            InputMethod::Elicitation => "elicitation",
            InputMethod::Sampling => "sampling",
            InputMethod::Roots => "roots",
        }
    }
}

/// One piece of input a primitive needs, under the key its answer will carry.
#[derive(Debug, Clone, PartialEq)]
pub struct InputRequest {
    pub key: String,
    pub method: InputMethod,
    pub params: Value,
}

impl InputRequest {
    pub fn new(key: &str, method: InputMethod, params: Value) -> InputRequest {
        InputRequest {
            key: key.to_owned(),
            method,
            params,
        }
    }

    /// The `{method, params}` object of an `inputRequests` map.
    pub fn to_value(&self) -> Value {
        json!({ "method": self.method.as_str(), "params": self.params })
    }
}

/// Answers by key.
pub type Answers = Map<String, Value>;

/// Why a primitive stopped before finishing.
#[derive(Debug, Clone, PartialEq)]
pub enum Interrupt {
    /// Modern era: these inputs are missing; answer with `input_required`.
    NeedInput(Vec<InputRequest>),
    /// A protocol error for the request.
    Failed(RpcError),
    /// The request (or task) was cancelled.
    Cancelled,
}

impl From<RpcError> for Interrupt {
    fn from(e: RpcError) -> Self {
        Interrupt::Failed(e)
    }
}

/// Where answers to [`Interaction::ask`] come from.
pub enum InputSource {
    /// Modern era: `inputResponses` plus the answers sealed in `requestState`.
    Replay(Replay),
    /// Legacy era: requests sent to the client over the connection.
    Client(Arc<ClientRequests>),
    /// A task: park in `input_required` until `tasks/update`.
    Task(Arc<TaskEntry>),
}

/// What a running primitive may do besides computing its result.
pub struct Interaction {
    pub fixture: Arc<Fixture>,
    pub out: Outbox,
    pub inputs: InputSource,
    /// The client's declared capabilities (a `ClientCapabilities` object).
    pub client_capabilities: Value,
    pub log: LogPolicy,
    pub progress_token: Option<Value>,
    pub cancel: CancellationToken,
}

impl Interaction {
    /// Gets answers to all of `requests`, by key.
    pub async fn ask(&mut self, requests: Vec<InputRequest>) -> Result<Answers, Interrupt> {
        match &mut self.inputs {
            InputSource::Replay(replay) => replay.take(requests, &self.client_capabilities),
            InputSource::Task(task) => task.await_inputs(requests, &self.cancel).await,
            InputSource::Client(client) => {
                let caps = &self.client_capabilities;
                if let Some(missing) = requests
                    .iter()
                    .find(|r| caps.get(r.method.capability()).is_none())
                {
                    return Err(missing_capability(missing).into());
                }
                let calls = requests
                    .iter()
                    .map(|r| client.call(&self.out, r.method.as_str(), &r.params));
                let answers = tokio::select! {
                    answers = join_all(calls) => answers,
                    () = self.cancel.cancelled() => return Err(Interrupt::Cancelled),
                };
                let mut out = Answers::new();
                for (request, answer) in requests.iter().zip(answers) {
                    let answer = answer?;
                    validate_answer(request, &answer)?;
                    out.insert(request.key.clone(), answer);
                }
                Ok(out)
            }
        }
    }

    /// Whether the client declared `capability` (`sampling`, `elicitation`, `roots`, ...).
    pub fn declares(&self, capability: &str) -> bool {
        self.client_capabilities.get(capability).is_some()
    }

    /// Whether request state this round relied on came back intact: always so when the state
    /// never left the process (legacy era, tasks).
    pub fn state_verified(&self) -> bool {
        match &self.inputs {
            InputSource::Replay(replay) => replay.state_verified(),
            InputSource::Client(_) | InputSource::Task(_) => true,
        }
    }

    /// Sends a log message if the request's log policy admits its level.
    pub async fn log(&self, level: LogLevel, message: &str) {
        if self.log.admits(level) {
            let params = json!({ "level": level.as_str(), "logger": LOGGER, "data": message });
            self.out.notify("notifications/message", &params).await;
        }
    }

    /// Reports progress when the request carried a progress token.
    pub async fn progress(&self, progress: u64, total: u64, message: &str) {
        if let Some(token) = &self.progress_token {
            let params = json!({
                "progressToken": token,
                "progress": progress,
                "total": total,
                "message": message,
            });
            self.out.notify("notifications/progress", &params).await;
        }
    }

    /// Ends the live response stream (HTTP SSE); the work goes on and its result can be resumed.
    pub async fn close_stream(&self) {
        self.out.send(Outgoing::CloseStream).await;
    }

    /// Waits, unless the request is cancelled first.
    pub async fn pause(&self, ms: u64) -> Result<(), Interrupt> {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(ms)) => Ok(()),
            () = self.cancel.cancelled() => Err(Interrupt::Cancelled),
        }
    }

    /// Tells every listener (subscriptions, legacy sessions) that something changed.
    pub fn announce(&self, change: Change) {
        self.fixture.hub.announce(change);
    }
}

/// The -32021 error for an input the client cannot give.
pub fn missing_capability(request: &InputRequest) -> RpcError {
    let mut required = Map::new();
    required.insert(request.method.capability().to_owned(), json!({}));
    RpcError::missing_capability(
        Value::Object(required),
        &format!(
            "This request asks the client for {} (key {:?}), which",
            request.method.as_str(),
            request.key
        ),
    )
}
