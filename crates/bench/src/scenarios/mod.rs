//! Why: the scenarios of the benchmark share how much work a run does (`Plan`: quick or
//! full), which contenders are up (`Fleet`), and the rule that contenders take turns round by
//! round in a rotating order, so that machine noise falls on all of them alike.

pub mod audit;
pub mod authored;
pub mod callgrind;
pub mod coldstart;
pub mod cpu;
pub mod fanout;
pub mod latency;
pub mod memory;
pub mod replicas;
pub mod sandbox;
pub mod targets;
pub mod throughput;

use std::time::Duration;

use crate::contenders::{Contender, Kind, Launcher, Upstream};

/// The scenarios, as `--only` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum)]
pub enum ScenarioId {
    /// 1. Sequential tools/call latency (small and 32 KiB; HTTP->stdio and HTTP->HTTP).
    Latency,
    /// 2. Calls per second and p99 at concurrency 1, 16, 64, 256.
    Throughput,
    /// 3. Gateway CPU time per forwarded call.
    Cpu,
    /// 4. Resident memory idle and with open legacy sessions; most sessions held.
    Memory,
    /// 5. tools/list over 100 upstreams of 100 tools.
    Fanout,
    /// 6. Time until tools/list answers with 20 stdio upstreams.
    Coldstart,
    /// 7. Scenario 1 for a modern (2026-07-28) client and a legacy session.
    Eras,
    /// 8. Manifold's audit trail off against on (SQLite best effort and required, PostgreSQL).
    Audit,
    /// 9. A stdio server sandboxed (strict) against unsandboxed: cold start, latency, CPU.
    Sandbox,
    /// 11. Authored tools (sh, python) against a server tool: latency and CPU per call.
    Authored,
    /// 12. One and three replicas behind HAProxy, and the shared features' cost (`--only` only).
    ///
    /// The replicas share one PostgreSQL; the features (store, audit, rate limits, an ask rule)
    /// are measured on one replica against a single gateway without PostgreSQL.
    ///
    /// Not in a default run: it needs HAProxy, and its figures are about deployment, not about
    /// Manifold against the other gateways.
    Replicas,
    /// 10. Instructions per forwarded call under callgrind, trail off and on (`--only` only).
    ///
    /// Not in a default run: it needs valgrind and runs the gateway tens of times slower.
    Callgrind,
}

/// Every scenario, in report order.
pub const ALL_SCENARIOS: [ScenarioId; 12] = [
    ScenarioId::Latency,
    ScenarioId::Throughput,
    ScenarioId::Cpu,
    ScenarioId::Memory,
    ScenarioId::Fanout,
    ScenarioId::Coldstart,
    ScenarioId::Eras,
    ScenarioId::Audit,
    ScenarioId::Sandbox,
    ScenarioId::Authored,
    ScenarioId::Replicas,
    ScenarioId::Callgrind,
];

/// What a run without `--only` measures: every scenario but those that need an extra tool.
pub fn default_scenario(id: ScenarioId) -> bool {
    !matches!(id, ScenarioId::Callgrind | ScenarioId::Replicas)
}

/// The small payload: a short message.
pub const SMALL_MESSAGE: &str = "manifold-bench says hello";
/// The large payload's size.
pub const LARGE_MESSAGE_BYTES: usize = 32 * 1024;

/// The 32 KiB message.
pub fn large_message() -> String {
    "x".repeat(LARGE_MESSAGE_BYTES)
}

/// How much work each scenario does.
#[derive(Debug, Clone)]
pub struct Plan {
    pub quick: bool,
    /// Rounds every contender takes its turn in (sequential calls, listings, starts).
    pub rounds: u32,
    /// Rounds of the timed concurrent batches (throughput, CPU).
    pub timed_rounds: u32,
    /// Sequential calls per case and contender, over all rounds.
    pub calls: u64,
    /// Untimed calls per case and contender before the rounds.
    pub warmup_calls: u64,
    /// A sequential batch stops after this long even if calls remain (slow contenders).
    pub batch_time_cap: Duration,
    pub concurrency_levels: Vec<usize>,
    /// Length of one timed concurrent batch.
    pub concurrent_batch: Duration,
    /// Open-session counts at which memory is read.
    pub memory_checkpoints: Vec<usize>,
    /// The most sessions the memory scenario tries to hold.
    pub memory_cap: usize,
    /// Time the memory scenario may spend on one contender.
    pub memory_budget: Duration,
    pub fanout_servers: usize,
    pub fanout_tools: u32,
    /// Full listings per round and contender.
    pub fanout_lists: u32,
    pub coldstart_servers: usize,
}

impl Plan {
    pub fn new(quick: bool, calls: Option<u64>, rounds: Option<u32>) -> Plan {
        let base = if quick {
            Plan {
                quick,
                rounds: 3,
                timed_rounds: 2,
                calls: 300,
                warmup_calls: 50,
                batch_time_cap: Duration::from_millis(1000),
                concurrency_levels: vec![1, 16, 64, 256],
                concurrent_batch: Duration::from_millis(400),
                memory_checkpoints: vec![1_000],
                memory_cap: 1_000,
                memory_budget: Duration::from_secs(20),
                fanout_servers: 100,
                fanout_tools: 100,
                fanout_lists: 5,
                coldstart_servers: 20,
            }
        } else {
            Plan {
                quick,
                rounds: 8,
                timed_rounds: 5,
                calls: 8_000,
                warmup_calls: 1_000,
                batch_time_cap: Duration::from_secs(5),
                concurrency_levels: vec![1, 16, 64, 256],
                concurrent_batch: Duration::from_secs(2),
                memory_checkpoints: vec![1_000, 10_000, 20_000, 50_000, 100_000],
                memory_cap: 100_000,
                memory_budget: Duration::from_secs(120),
                fanout_servers: 100,
                fanout_tools: 100,
                fanout_lists: 20,
                coldstart_servers: 20,
            }
        };
        Plan {
            rounds: rounds.unwrap_or(base.rounds).max(1),
            timed_rounds: rounds.unwrap_or(base.timed_rounds).max(1),
            calls: calls.unwrap_or(base.calls).max(1),
            warmup_calls: calls.map_or(base.warmup_calls, |c| c.min(base.warmup_calls)),
            ..base
        }
    }

    /// Calls in round `round` so that the rounds add up to `calls` exactly.
    pub fn batch_calls(&self, round: u32) -> u64 {
        let rounds = u64::from(self.rounds);
        self.calls / rounds + u64::from(u64::from(round) < self.calls % rounds)
    }
}

/// The order contenders take their turns in round `round`: rotated by one each round, so no
/// contender always goes first (right after a quiet pause) or last.
pub fn rotation(round: u32, count: usize) -> impl Iterator<Item = usize> {
    let shift = if count == 0 {
        0
    } else {
        round as usize % count
    };
    (0..count).map(move |i| (i + shift) % count)
}

/// A contender's place in a fleet.
pub enum Member {
    Up(Box<Contender>),
    /// It was asked for and could not start.
    Down(String),
    /// It cannot front this upstream.
    NotApplicable(&'static str),
}

/// The contenders asked for, each started in front of its own copy of the same upstream.
pub struct Fleet {
    pub members: Vec<(Kind, Member)>,
}

impl Fleet {
    pub async fn start(launcher: &Launcher, kinds: &[Kind], upstream: Upstream) -> Fleet {
        let mut members = Vec::with_capacity(kinds.len());
        for kind in kinds {
            let member = match upstream.unsupported_by(*kind) {
                Some(reason) => Member::NotApplicable(reason),
                None => match launcher.start(*kind, upstream).await {
                    Ok(contender) => Member::Up(Box::new(contender)),
                    Err(e) => Member::Down(e),
                },
            };
            members.push((*kind, member));
        }
        Fleet { members }
    }

    pub async fn stop(self) {
        for (_, member) in self.members {
            if let Member::Up(contender) = member {
                contender.stop().await;
            }
        }
    }
}

/// What a contender that is not up shows in a row: n/a or failed, with why.
pub fn absent_row(case: &str, kind: Kind, member: &Member) -> Option<crate::report::Row> {
    match member {
        Member::Up(_) => None,
        Member::Down(why) => Some(crate::report::Row::failed(
            case,
            kind.name(),
            format!("did not start: {why}"),
        )),
        Member::NotApplicable(why) => {
            Some(crate::report::Row::not_applicable(case, kind.name(), why))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn callgrind_runs_only_when_asked_for() {
        assert!(ALL_SCENARIOS.contains(&ScenarioId::Callgrind));
        assert!(!default_scenario(ScenarioId::Callgrind));
        assert!(ALL_SCENARIOS.contains(&ScenarioId::Replicas));
        assert!(!default_scenario(ScenarioId::Replicas));
        assert!(default_scenario(ScenarioId::Sandbox));
    }

    #[test]
    fn rounds_add_up_to_the_calls_asked_for() {
        let plan = Plan::new(true, Some(20), None);
        let total: u64 = (0..plan.rounds).map(|r| plan.batch_calls(r)).sum();
        assert_eq!(total, 20);
        let plan = Plan::new(false, Some(7), Some(7));
        assert!((0..7).all(|r| plan.batch_calls(r) == 1));
    }

    #[test]
    fn every_contender_goes_first_once_per_cycle() {
        let firsts: Vec<usize> = (0..3).map(|r| rotation(r, 3).next().unwrap()).collect();
        assert_eq!(firsts, vec![0, 1, 2]);
        let mut one: Vec<usize> = rotation(4, 3).collect();
        one.sort_unstable();
        assert_eq!(one, vec![0, 1, 2]);
    }
}
