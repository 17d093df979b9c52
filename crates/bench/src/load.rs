//! Why: every scenario drives contenders with the same two workloads (sequential calls on one
//! connection, and N workers calling at once for a fixed time), so the way calls are made, timed,
//! warmed up and counted is identical for every contender and written once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::{ClientError, Connection, Endpoint, Era, Prepared, Session};
use crate::stats::Samples;

/// A session of one contender, with its `tools/call` prepared.
pub struct Caller {
    endpoint: Endpoint,
    prepared: Arc<Prepared>,
    next_id: u64,
}

impl Caller {
    /// Opens a session (its own connection, closed again) and prepares the call.
    pub async fn open(
        endpoint: &Endpoint,
        era: Era,
        tool: &str,
        message: &str,
    ) -> Result<Caller, ClientError> {
        let mut connection = Connection::open(endpoint).await?;
        let session = Session::open(&mut connection, era).await?;
        let prepared = Arc::new(Prepared::tools_call(&session, tool, message)?);
        Ok(Caller {
            endpoint: endpoint.clone(),
            prepared,
            next_id: 0,
        })
    }

    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// One call on a fresh connection, untimed: does this contender serve this session at all?
    pub async fn probe(&mut self) -> Result<(), ClientError> {
        let mut connection = Connection::open(&self.endpoint).await?;
        let id = self.next_id();
        self.prepared.call(&mut connection, id).await.map(|_| ())
    }

    /// Up to `calls` calls one after another (stopping at `time_cap`), on a fresh connection that
    /// first makes one untimed call, so an idle connection the server closed never counts.
    /// `samples: None` runs them untimed (warm-up).
    pub async fn sequential(
        &mut self,
        calls: u64,
        time_cap: Duration,
        mut samples: Option<&mut Samples>,
    ) {
        let mut connection = match self.warm_connection().await {
            Ok(c) => c,
            Err(e) => {
                if let Some(s) = samples {
                    s.record_error(e);
                }
                return;
            }
        };
        let started = Instant::now();
        for _ in 0..calls {
            if started.elapsed() > time_cap {
                break;
            }
            let id = self.next_id();
            match self.prepared.call(&mut connection, id).await {
                Ok(latency) => {
                    if let Some(s) = samples.as_deref_mut() {
                        s.record(latency);
                    }
                }
                Err(e) => {
                    let broken = is_transport_failure(&e);
                    if let Some(s) = samples.as_deref_mut() {
                        s.record_error(e);
                    }
                    if broken {
                        match Connection::open(&self.endpoint).await {
                            Ok(fresh) => connection = fresh,
                            Err(_) => return,
                        }
                    }
                }
            }
        }
    }

    async fn warm_connection(&mut self) -> Result<Connection, ClientError> {
        let mut connection = Connection::open(&self.endpoint).await?;
        let id = self.next_id();
        self.prepared.call(&mut connection, id).await?;
        Ok(connection)
    }
}

fn is_transport_failure(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::Http(_) | ClientError::Connect { .. } | ClientError::Timeout(_)
    )
}

/// What a concurrent batch measured.
#[derive(Debug, Default)]
pub struct BatchOutcome {
    pub latencies: Vec<u64>,
    pub errors: u64,
    pub first_error: Option<String>,
    /// From the common start to the end of the last call.
    pub elapsed: Duration,
}

impl BatchOutcome {
    pub fn calls_per_second(&self) -> f64 {
        let seconds = self.elapsed.as_secs_f64();
        if seconds > 0.0 {
            self.latencies.len() as f64 / seconds
        } else {
            0.0
        }
    }
}

struct WorkerOutcome {
    caller: Caller,
    latencies: Vec<u64>,
    errors: u64,
    first_error: Option<String>,
}

/// Every caller calls as fast as it can for `duration`, all starting together (each on a fresh,
/// warmed connection). Returns the callers for the next round.
pub async fn run_concurrently(
    callers: Vec<Caller>,
    duration: Duration,
) -> (Vec<Caller>, BatchOutcome) {
    let barrier = Arc::new(tokio::sync::Barrier::new(callers.len() + 1));
    let mut handles = Vec::with_capacity(callers.len());
    for caller in callers {
        let barrier = barrier.clone();
        handles.push(tokio::spawn(worker(caller, barrier, duration)));
    }
    barrier.wait().await;
    let started = Instant::now();
    let mut outcome = BatchOutcome::default();
    let mut callers = Vec::with_capacity(handles.len());
    for handle in handles {
        match handle.await {
            Ok(done) => {
                outcome.latencies.extend(done.latencies);
                outcome.errors += done.errors;
                if outcome.first_error.is_none() {
                    outcome.first_error = done.first_error;
                }
                callers.push(done.caller);
            }
            Err(e) => {
                outcome.errors += 1;
                outcome
                    .first_error
                    .get_or_insert_with(|| format!("a worker failed: {e}"));
            }
        }
    }
    outcome.elapsed = started.elapsed();
    (callers, outcome)
}

async fn worker(
    mut caller: Caller,
    barrier: Arc<tokio::sync::Barrier>,
    duration: Duration,
) -> WorkerOutcome {
    let warmed = caller.warm_connection().await;
    barrier.wait().await;
    let deadline = Instant::now() + duration;
    let mut latencies = Vec::with_capacity(4096);
    let mut errors = 0;
    let mut first_error = None;
    let mut connection = match warmed {
        Ok(c) => c,
        Err(e) => {
            return WorkerOutcome {
                caller,
                latencies,
                errors: 1,
                first_error: Some(e.to_string()),
            };
        }
    };
    while Instant::now() < deadline {
        let id = caller.next_id();
        match caller.prepared.call(&mut connection, id).await {
            Ok(latency) => latencies.push(u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX)),
            Err(e) => {
                errors += 1;
                let broken = is_transport_failure(&e);
                first_error.get_or_insert_with(|| e.to_string());
                if broken {
                    match Connection::open(&caller.endpoint).await {
                        Ok(fresh) => connection = fresh,
                        Err(_) => break,
                    }
                }
            }
        }
    }
    WorkerOutcome {
        caller,
        latencies,
        errors,
        first_error,
    }
}

/// Opens `count` callers at once (at most `parallel` at a time); the first failure is returned
/// with those that did open.
pub async fn open_callers(
    endpoint: &Endpoint,
    era: Era,
    tool: &str,
    message: &str,
    count: usize,
    parallel: usize,
) -> Result<Vec<Caller>, (Vec<Caller>, ClientError)> {
    let mut opened = Vec::with_capacity(count);
    let mut remaining = count;
    while remaining > 0 {
        let wave = remaining.min(parallel.max(1));
        let mut handles = Vec::with_capacity(wave);
        for _ in 0..wave {
            let endpoint = endpoint.clone();
            let tool = tool.to_owned();
            let message = message.to_owned();
            handles.push(tokio::spawn(async move {
                Caller::open(&endpoint, era, &tool, &message).await
            }));
        }
        let mut failure = None;
        for handle in handles {
            match handle.await {
                Ok(Ok(caller)) => opened.push(caller),
                Ok(Err(e)) => {
                    failure.get_or_insert(e);
                }
                Err(e) => {
                    failure.get_or_insert(ClientError::Protocol(format!("a task failed: {e}")));
                }
            }
        }
        if let Some(e) = failure {
            return Err((opened, e));
        }
        remaining -= wave;
    }
    Ok(opened)
}
