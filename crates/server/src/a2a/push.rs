//! Push notifications: a client names a webhook (in `SendMessage`'s configuration or
//! with `CreateTaskPushNotificationConfig`) and gets the task POSTed there when it
//! pauses for input and when it ends. The POSTs are the executions' signed webhooks
//! (`[executions] webhook_secret`, the same address screen, `x-agentplane-*` signature
//! headers; `docs/executions.md`), with the client's notification token
//! (`X-A2A-Notification-Token`) and credentials (`Authorization`) as A2A asks. Without
//! a webhook secret, push notifications are not offered.
//!
//! Configurations live in this process, for tasks it started and while they run: they
//! do not survive a restart (a task that outlives one is still read with `GetTask`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentplane_a2a::v0_3;
use agentplane_a2a::wire::{self, AuthenticationInfo, StreamResponse, Task, codes};
use agentplane_core::DeliveryId;
use agentplane_engine::executions::{WebhookOutcome, WebhookRequest, WebhookSender};
use serde::Deserialize;
use serde_json::Value;

use super::rpc::{find, parse};
use super::{Call, Failure, Generation};

/// The event name of an A2A push in `x-agentplane-event`.
pub(crate) const TASK_UPDATED: &str = "a2a.task";
/// Most configurations one task holds.
const MAX_PER_TASK: usize = 8;
/// Delays before the second and third POST of a failed push.
const RETRIES: [Duration; 2] = [Duration::from_secs(1), Duration::from_secs(5)];

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
    fn config(&self, task: &str) -> wire::TaskPushNotificationConfig {
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

    fn add(&self, task: &str, target: Target) -> Result<(), Failure> {
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

    fn remove(&self, task: &str, id: &str) -> bool {
        let mut inner = self.lock();
        let Some(targets) = inner.targets.get_mut(task) else {
            return false;
        };
        let before = targets.len();
        targets.retain(|t| t.id != id);
        before != targets.len()
    }
}

/// POSTs `task` to each target, each in its generation's shape; a failed POST is tried
/// again twice, a refused one (a private address…) never.
pub(crate) async fn notify(sender: Arc<dyn WebhookSender>, targets: Vec<Target>, task: Task) {
    for target in targets {
        let body = match target.generation {
            Generation::V1 => serde_json::to_vec(&StreamResponse::Task(task.clone())),
            Generation::V0_3 => serde_json::to_vec(&v0_3::task_from_v1(&task)),
        }
        .unwrap_or_default();
        let sender = sender.clone();
        let task_id = task.id.clone();
        tokio::spawn(async move {
            let delivery = DeliveryId::new();
            let mut headers: Vec<(String, String)> = Vec::new();
            if let Some(token) = &target.token {
                headers.push(("x-a2a-notification-token".into(), token.clone()));
            }
            if let Some(auth) = &target.authentication
                && let Some(credentials) = &auth.credentials
            {
                headers.push((
                    "authorization".into(),
                    format!("{} {credentials}", auth.scheme),
                ));
            }
            let headers: Vec<(&str, &str)> = headers
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect();
            for attempt in 0..=RETRIES.len() {
                let outcome = sender
                    .send(WebhookRequest {
                        url: &target.url,
                        delivery: &delivery,
                        body: &body,
                        event: TASK_UPDATED,
                        headers: &headers,
                    })
                    .await;
                match outcome {
                    WebhookOutcome::Delivered { .. } => return,
                    WebhookOutcome::Refused { error } => {
                        tracing::warn!(task = %task_id, %error, "an A2A push notification was refused");
                        return;
                    }
                    WebhookOutcome::Failed { error, .. } => {
                        tracing::warn!(task = %task_id, attempt, %error, "an A2A push notification failed");
                        match RETRIES.get(attempt) {
                            Some(delay) => tokio::time::sleep(*delay).await,
                            None => return,
                        }
                    }
                }
            }
        });
    }
}

/// The sender, or `PushNotificationNotSupported` without a webhook secret.
pub(crate) fn sender(call: &Call) -> Result<Arc<dyn WebhookSender>, Failure> {
    call.state.webhooks.clone().ok_or_else(|| {
        Failure::rpc(
            codes::PUSH_NOTIFICATION_NOT_SUPPORTED,
            "Push Notification is not supported: this server signs no webhooks \
             ([executions] webhook_secret)",
        )
    })
}

/// 0.3's params naming a task and, maybe, one of its configurations.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LegacyConfigRef {
    id: String,
    #[serde(default)]
    push_notification_config_id: Option<String>,
}

fn config_json(call: &Call, target: &Target, task: &str) -> Value {
    let config = target.config(task);
    match call.generation {
        Generation::V1 => serde_json::to_value(config),
        Generation::V0_3 => serde_json::to_value(v0_3::push_config_from_v1(&config)),
    }
    .unwrap_or(Value::Null)
}

/// The push configuration methods of both generations.
pub(crate) async fn method(call: &Call, params: Value) -> Result<Value, Failure> {
    use wire::methods as m;
    let sender = sender(call)?;
    match call.method {
        m::CREATE_TASK_PUSH_NOTIFICATION_CONFIG => {
            let config = match call.generation {
                Generation::V1 => parse::<wire::TaskPushNotificationConfig>(params)?,
                Generation::V0_3 => {
                    let legacy: v0_3::TaskPushNotificationConfig = parse(params)?;
                    v0_3::push_config_to_v1(&legacy.push_notification_config, Some(&legacy.task_id))
                }
            };
            let task = config.task_id.clone().unwrap_or_default();
            find(call, &task).await?;
            let target = Target::of(&config, call.generation, sender.as_ref())?;
            call.state.pushes.add(&task, target.clone())?;
            Ok(config_json(call, &target, &task))
        }
        m::GET_TASK_PUSH_NOTIFICATION_CONFIG | m::DELETE_TASK_PUSH_NOTIFICATION_CONFIG => {
            let (task, id) = match call.generation {
                Generation::V1 => {
                    let r: wire::TaskPushNotificationConfigRef = parse(params)?;
                    (r.task_id, r.id)
                }
                Generation::V0_3 => {
                    let r: LegacyConfigRef = parse(params)?;
                    (r.id, r.push_notification_config_id)
                }
            };
            find(call, &task).await?;
            let id = id.unwrap_or_else(|| "default".to_owned());
            if call.method == m::DELETE_TASK_PUSH_NOTIFICATION_CONFIG {
                if !call.state.pushes.remove(&task, &id) {
                    return Err(Failure::rpc(
                        codes::INVALID_PARAMS,
                        format!("no push notification configuration {id}"),
                    ));
                }
                return Ok(match call.generation {
                    Generation::V1 => Value::Object(Default::default()),
                    Generation::V0_3 => Value::Null,
                });
            }
            let target = call
                .state
                .pushes
                .current(&task)
                .into_iter()
                .find(|t| t.id == id)
                .ok_or_else(|| {
                    Failure::rpc(
                        codes::INVALID_PARAMS,
                        format!("no push notification configuration {id}"),
                    )
                })?;
            Ok(config_json(call, &target, &task))
        }
        // List.
        _ => {
            let task = match call.generation {
                Generation::V1 => {
                    parse::<wire::ListTaskPushNotificationConfigsRequest>(params)?.task_id
                }
                Generation::V0_3 => parse::<LegacyConfigRef>(params)?.id,
            };
            find(call, &task).await?;
            let configs: Vec<Value> = call
                .state
                .pushes
                .current(&task)
                .iter()
                .map(|t| config_json(call, t, &task))
                .collect();
            Ok(match call.generation {
                Generation::V1 => serde_json::json!({ "configs": configs }),
                Generation::V0_3 => Value::Array(configs),
            })
        }
    }
}
