//! The push notification configurations this process holds: a [`Target`] per webhook
//! of a task, in the [`Registry`] of the tasks started here and still running. The
//! methods that change them and the POSTs are `super::push`'s.
//!
//! What must not live here: sending (`super::push`).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use agentplane_a2a::wire::{self, AuthenticationInfo, codes};
use agentplane_engine::executions::WebhookSender;

use super::protocol::{Failure, Generation};

/// Most configurations one task holds.
const MAX_PER_TASK: usize = 8;

/// One webhook of one task.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) id: String,
    pub(crate) url: String,
    pub(crate) token: Option<String>,
    pub(crate) authentication: Option<AuthenticationInfo>,
    /// The generation whose shapes the body is written in.
    pub(crate) generation: Generation,
}

impl Target {
    pub(super) fn config(&self, task: &str) -> wire::TaskPushNotificationConfig {
        wire::TaskPushNotificationConfig {
            tenant: None,
            id: Some(self.id.clone()),
            task_id: Some(task.to_owned()),
            url: self.url.clone(),
            token: self.token.clone(),
            authentication: self.authentication.clone(),
        }
    }

    /// The target a configuration asks for, checked (`url` screened like an
    /// execution's webhook).
    pub(crate) fn of(
        config: &wire::TaskPushNotificationConfig,
        generation: Generation,
        sender: &dyn WebhookSender,
    ) -> Result<Self, Failure> {
        sender.check(&config.url).map_err(|e| {
            Failure::rpc(codes::INVALID_PARAMS, format!("push notification url: {e}"))
        })?;
        Ok(Self {
            id: config
                .id
                .clone()
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| "default".to_owned()),
            url: config.url.clone(),
            token: config.token.clone().filter(|t| !t.is_empty()),
            authentication: config.authentication.clone(),
            generation,
        })
    }
}

/// The configurations of the tasks this process follows.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Tasks started here and still running: only they can take a configuration.
    live: HashSet<String>,
    targets: HashMap<String, Vec<Target>>,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A task started here, with the configuration its message named.
    pub(crate) fn follow(&self, task: &str, target: Option<Target>) {
        let mut inner = self.lock();
        inner.live.insert(task.to_owned());
        if let Some(target) = target {
            inner.targets.insert(task.to_owned(), vec![target]);
        }
    }

    /// The task's configurations now (it paused).
    pub(crate) fn current(&self, task: &str) -> Vec<Target> {
        self.lock().targets.get(task).cloned().unwrap_or_default()
    }

    /// The task ended: its configurations, for the last time.
    pub(crate) fn finish(&self, task: &str) -> Vec<Target> {
        let mut inner = self.lock();
        inner.live.remove(task);
        inner.targets.remove(task).unwrap_or_default()
    }

    pub(super) fn add(&self, task: &str, target: Target) -> Result<(), Failure> {
        let mut inner = self.lock();
        if !inner.live.contains(task) {
            return Err(Failure::rpc(
                codes::UNSUPPORTED_OPERATION,
                "push notifications are offered for running tasks started over A2A by this server",
            ));
        }
        let targets = inner.targets.entry(task.to_owned()).or_default();
        targets.retain(|t| t.id != target.id);
        if targets.len() >= MAX_PER_TASK {
            return Err(Failure::rpc(
                codes::INVALID_PARAMS,
                format!("a task holds at most {MAX_PER_TASK} push notification configurations"),
            ));
        }
        targets.push(target);
        Ok(())
    }

    pub(super) fn remove(&self, task: &str, id: &str) -> bool {
        let mut inner = self.lock();
        let Some(targets) = inner.targets.get_mut(task) else {
            return false;
        };
        let before = targets.len();
        targets.retain(|t| t.id != id);
        before != targets.len()
    }
}
