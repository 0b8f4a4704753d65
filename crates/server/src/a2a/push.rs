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

use std::sync::Arc;
use std::time::Duration;

use agentplane_a2a::v0_3;
use agentplane_a2a::wire::{self, StreamResponse, Task, codes};
use agentplane_core::DeliveryId;
use agentplane_engine::executions::{WebhookOutcome, WebhookRequest, WebhookSender};
use serde::Deserialize;
use serde_json::Value;

use super::call::{Call, find, parse};
use super::protocol::{Failure, Generation};
use super::targets::Target;

/// The event name of an A2A push in `x-agentplane-event`.
pub(crate) const TASK_UPDATED: &str = "a2a.task";
/// Delays before the second and third POST of a failed push.
const RETRIES: [Duration; 2] = [Duration::from_secs(1), Duration::from_secs(5)];

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
