//! The authorization state a gateway holds and a reload replaces: the rules and rate limits in
//! force, and who started which task (bounded, oldest forgotten first).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use super::rules::Policy;
use crate::rate_limit::{RateLimiter, RateLimits};

/// Tasks remembered with the identity and tool that started them; the oldest are forgotten first.
pub const MAX_TRACKED_TASKS: usize = 10_000;

/// Who started a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TaskOwner {
    pub(crate) server: String,
    pub(crate) tool: String,
    pub(crate) caller: Option<String>,
}

/// Started tasks by exposed id, bounded, oldest forgotten first.
#[derive(Debug, Default)]
pub(crate) struct TaskOwners {
    pub(crate) order: VecDeque<String>,
    pub(crate) owners: HashMap<String, TaskOwner>,
}

impl TaskOwners {
    pub(crate) fn insert(&mut self, task: String, owner: TaskOwner) {
        if self.owners.insert(task.clone(), owner).is_none() {
            self.order.push_back(task);
        }
        while self.order.len() > MAX_TRACKED_TASKS {
            if let Some(old) = self.order.pop_front() {
                self.owners.remove(&old);
            }
        }
    }
}

/// The live authorization state of one gateway: replaced whole on reload.
pub(crate) struct Access {
    policy: RwLock<Arc<Policy>>,
    limiter: RwLock<Arc<RateLimiter>>,
    tasks: Mutex<TaskOwners>,
}

impl Access {
    pub(crate) fn new(rules: Policy, rate_limits: RateLimits) -> Access {
        Access {
            policy: RwLock::new(Arc::new(rules)),
            limiter: RwLock::new(Arc::new(RateLimiter::new(rate_limits))),
            tasks: Mutex::new(TaskOwners::default()),
        }
    }

    /// Puts new rules and limits in force; every bucket starts full.
    pub(crate) fn replace(&self, rules: Policy, rate_limits: RateLimits) {
        *self.policy.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(rules);
        *self.limiter.write().unwrap_or_else(PoisonError::into_inner) =
            Arc::new(RateLimiter::new(rate_limits));
    }

    /// Remembers who started `task` (the oldest are forgotten past [`MAX_TRACKED_TASKS`]).
    pub(crate) fn record_task(&self, task: String, owner: TaskOwner) {
        self.tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(task, owner);
    }

    pub(crate) fn policy(&self) -> Arc<Policy> {
        Arc::clone(&self.policy.read().unwrap_or_else(PoisonError::into_inner))
    }

    pub(crate) fn limiter(&self) -> Arc<RateLimiter> {
        Arc::clone(&self.limiter.read().unwrap_or_else(PoisonError::into_inner))
    }

    pub(crate) fn task_owner(&self, task: &str) -> Option<TaskOwner> {
        self.tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .owners
            .get(task)
            .cloned()
    }
}
