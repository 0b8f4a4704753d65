//! Conversions between protocol 0.3 and 1.0, each way (`*_from_v1`: 1.0 to 0.3;
//! `*_to_v1`: 0.3 to 1.0), and the card both generations read.

use std::collections::BTreeMap;

use serde_json::Value;

use super::shapes::*;
use crate::wire;

pub fn state_from_v1(state: wire::TaskState) -> TaskState {
    match state {
        wire::TaskState::Unspecified => TaskState::Unknown,
        wire::TaskState::Submitted => TaskState::Submitted,
        wire::TaskState::Working => TaskState::Working,
        wire::TaskState::Completed => TaskState::Completed,
        wire::TaskState::Failed => TaskState::Failed,
        wire::TaskState::Canceled => TaskState::Canceled,
        wire::TaskState::InputRequired => TaskState::InputRequired,
        wire::TaskState::Rejected => TaskState::Rejected,
        wire::TaskState::AuthRequired => TaskState::AuthRequired,
    }
}

pub fn state_to_v1(state: TaskState) -> wire::TaskState {
    match state {
        TaskState::Unknown => wire::TaskState::Unspecified,
        TaskState::Submitted => wire::TaskState::Submitted,
        TaskState::Working => wire::TaskState::Working,
        TaskState::Completed => wire::TaskState::Completed,
        TaskState::Failed => wire::TaskState::Failed,
        TaskState::Canceled => wire::TaskState::Canceled,
        TaskState::InputRequired => wire::TaskState::InputRequired,
        TaskState::Rejected => wire::TaskState::Rejected,
        TaskState::AuthRequired => wire::TaskState::AuthRequired,
    }
}

pub fn part_from_v1(part: &wire::Part) -> Part {
    let metadata = part.metadata.clone();
    let file = |bytes: Option<String>, uri: Option<String>| Part::File {
        file: FileContent {
            bytes,
            uri,
            mime_type: part.media_type.clone(),
            name: part.filename.clone(),
        },
        metadata: metadata.clone(),
    };
    match &part.content {
        wire::PartContent::Text(text) => Part::Text {
            text: text.clone(),
            metadata,
        },
        // 0.3's data part holds an object; any other JSON value is wrapped.
        wire::PartContent::Data(data) => Part::Data {
            data: if data.is_object() {
                data.clone()
            } else {
                serde_json::json!({ "value": data })
            },
            metadata,
        },
        wire::PartContent::Raw(bytes) => file(Some(bytes.clone()), None),
        wire::PartContent::Url(url) => file(None, Some(url.clone())),
    }
}

pub fn part_to_v1(part: &Part) -> wire::Part {
    match part {
        Part::Text { text, metadata } => wire::Part {
            metadata: metadata.clone(),
            ..wire::Part::text(text.clone())
        },
        Part::Data { data, metadata } => wire::Part {
            metadata: metadata.clone(),
            ..wire::Part::data(data.clone())
        },
        Part::File { file, metadata } => wire::Part {
            content: match (&file.bytes, &file.uri) {
                (Some(bytes), _) => wire::PartContent::Raw(bytes.clone()),
                (None, uri) => wire::PartContent::Url(uri.clone().unwrap_or_default()),
            },
            metadata: metadata.clone(),
            filename: file.name.clone(),
            media_type: file.mime_type.clone(),
        },
    }
}

pub fn message_from_v1(message: &wire::Message) -> Message {
    Message {
        kind: MessageKind::Kind,
        message_id: message.message_id.clone(),
        role: match message.role {
            wire::Role::User | wire::Role::Unspecified => Role::User,
            wire::Role::Agent => Role::Agent,
        },
        parts: message.parts.iter().map(part_from_v1).collect(),
        context_id: message.context_id.clone(),
        task_id: message.task_id.clone(),
        reference_task_ids: non_empty(&message.reference_task_ids),
        metadata: message.metadata.clone(),
        extensions: non_empty(&message.extensions),
    }
}

pub fn message_to_v1(message: &Message) -> wire::Message {
    wire::Message {
        message_id: message.message_id.clone(),
        context_id: message.context_id.clone(),
        task_id: message.task_id.clone(),
        role: match message.role {
            Role::User => wire::Role::User,
            Role::Agent => wire::Role::Agent,
        },
        parts: message.parts.iter().map(part_to_v1).collect(),
        metadata: message.metadata.clone(),
        extensions: message.extensions.clone().unwrap_or_default(),
        reference_task_ids: message.reference_task_ids.clone().unwrap_or_default(),
    }
}

fn non_empty(list: &[String]) -> Option<Vec<String>> {
    (!list.is_empty()).then(|| list.to_vec())
}

pub fn status_from_v1(status: &wire::TaskStatus) -> TaskStatus {
    TaskStatus {
        state: state_from_v1(status.state),
        message: status.message.as_ref().map(message_from_v1),
        timestamp: status.timestamp.clone(),
    }
}

pub fn status_to_v1(status: &TaskStatus) -> wire::TaskStatus {
    wire::TaskStatus {
        state: state_to_v1(status.state),
        message: status.message.as_ref().map(message_to_v1),
        timestamp: status.timestamp.clone(),
    }
}

pub fn artifact_from_v1(artifact: &wire::Artifact) -> Artifact {
    Artifact {
        artifact_id: artifact.artifact_id.clone(),
        parts: artifact.parts.iter().map(part_from_v1).collect(),
        name: artifact.name.clone(),
        description: artifact.description.clone(),
        metadata: artifact.metadata.clone(),
        extensions: non_empty(&artifact.extensions),
    }
}

pub fn artifact_to_v1(artifact: &Artifact) -> wire::Artifact {
    wire::Artifact {
        artifact_id: artifact.artifact_id.clone(),
        name: artifact.name.clone(),
        description: artifact.description.clone(),
        parts: artifact.parts.iter().map(part_to_v1).collect(),
        metadata: artifact.metadata.clone(),
        extensions: artifact.extensions.clone().unwrap_or_default(),
    }
}

pub fn task_from_v1(task: &wire::Task) -> Task {
    Task {
        kind: TaskKind::Kind,
        id: task.id.clone(),
        context_id: task.context_id.clone(),
        status: status_from_v1(&task.status),
        artifacts: (!task.artifacts.is_empty())
            .then(|| task.artifacts.iter().map(artifact_from_v1).collect()),
        history: (!task.history.is_empty())
            .then(|| task.history.iter().map(message_from_v1).collect()),
        metadata: task.metadata.clone(),
    }
}

pub fn task_to_v1(task: &Task) -> wire::Task {
    wire::Task {
        id: task.id.clone(),
        context_id: task.context_id.clone(),
        status: status_to_v1(&task.status),
        artifacts: task
            .artifacts
            .iter()
            .flatten()
            .map(artifact_to_v1)
            .collect(),
        history: task.history.iter().flatten().map(message_to_v1).collect(),
        metadata: task.metadata.clone(),
    }
}

/// A 1.0 stream item as 0.3 writes it. A status update is `final` when its state is
/// terminal or waits for the client (the stream ends there in both generations).
pub fn event_from_v1(item: &wire::StreamResponse) -> Event {
    match item {
        wire::StreamResponse::Task(task) => Event::Task(task_from_v1(task)),
        wire::StreamResponse::Message(message) => Event::Message(message_from_v1(message)),
        wire::StreamResponse::StatusUpdate(update) => Event::StatusUpdate(TaskStatusUpdateEvent {
            kind: StatusUpdateKind::Kind,
            task_id: update.task_id.clone(),
            context_id: update.context_id.clone(),
            status: status_from_v1(&update.status),
            is_final: update.status.state.is_terminal() || update.status.state.is_interrupted(),
            metadata: update.metadata.clone(),
        }),
        wire::StreamResponse::ArtifactUpdate(update) => {
            Event::ArtifactUpdate(TaskArtifactUpdateEvent {
                kind: ArtifactUpdateKind::Kind,
                task_id: update.task_id.clone(),
                context_id: update.context_id.clone(),
                artifact: artifact_from_v1(&update.artifact),
                append: Some(update.append),
                last_chunk: Some(update.last_chunk),
                metadata: update.metadata.clone(),
            })
        }
    }
}

/// A 0.3 stream item or `message/send` result as 1.0's.
pub fn event_to_v1(event: &Event) -> wire::StreamResponse {
    match event {
        Event::Task(task) => wire::StreamResponse::Task(task_to_v1(task)),
        Event::Message(message) => wire::StreamResponse::Message(message_to_v1(message)),
        Event::StatusUpdate(update) => {
            wire::StreamResponse::StatusUpdate(wire::TaskStatusUpdateEvent {
                task_id: update.task_id.clone(),
                context_id: update.context_id.clone(),
                status: status_to_v1(&update.status),
                metadata: update.metadata.clone(),
            })
        }
        Event::ArtifactUpdate(update) => {
            wire::StreamResponse::ArtifactUpdate(wire::TaskArtifactUpdateEvent {
                task_id: update.task_id.clone(),
                context_id: update.context_id.clone(),
                artifact: artifact_to_v1(&update.artifact),
                append: update.append.unwrap_or(false),
                last_chunk: update.last_chunk.unwrap_or(false),
                metadata: update.metadata.clone(),
            })
        }
    }
}

pub fn push_config_to_v1(
    config: &PushNotificationConfig,
    task_id: Option<&str>,
) -> wire::TaskPushNotificationConfig {
    wire::TaskPushNotificationConfig {
        tenant: None,
        id: config.id.clone(),
        task_id: task_id.map(str::to_owned),
        url: config.url.clone(),
        token: config.token.clone(),
        authentication: config
            .authentication
            .as_ref()
            .map(|auth| wire::AuthenticationInfo {
                scheme: auth.schemes.first().cloned().unwrap_or_default(),
                credentials: auth.credentials.clone(),
            }),
    }
}

pub fn push_config_from_v1(
    config: &wire::TaskPushNotificationConfig,
) -> TaskPushNotificationConfig {
    TaskPushNotificationConfig {
        task_id: config.task_id.clone().unwrap_or_default(),
        push_notification_config: PushNotificationConfig {
            url: config.url.clone(),
            id: config.id.clone(),
            token: config.token.clone(),
            authentication: config.authentication.as_ref().map(|auth| {
                PushNotificationAuthenticationInfo {
                    schemes: vec![auth.scheme.clone()],
                    credentials: auth.credentials.clone(),
                }
            }),
        },
    }
}

/// `message/send` params as 1.0's `SendMessageRequest` (`blocking: false` is
/// `returnImmediately`).
pub fn send_params_to_v1(params: &MessageSendParams) -> wire::SendMessageRequest {
    let configuration = params
        .configuration
        .as_ref()
        .map(|c| wire::SendMessageConfiguration {
            accepted_output_modes: c.accepted_output_modes.clone().unwrap_or_default(),
            task_push_notification_config: c
                .push_notification_config
                .as_ref()
                .map(|p| push_config_to_v1(p, None)),
            history_length: c.history_length,
            return_immediately: c.blocking == Some(false),
        });
    wire::SendMessageRequest {
        tenant: None,
        message: message_to_v1(&params.message),
        configuration,
        metadata: params.metadata.clone(),
    }
}

/// 1.0's `SendMessageRequest` as 0.3's `message/send` params.
pub fn send_params_from_v1(request: &wire::SendMessageRequest) -> MessageSendParams {
    MessageSendParams {
        message: message_from_v1(&request.message),
        configuration: request
            .configuration
            .as_ref()
            .map(|c| MessageSendConfiguration {
                accepted_output_modes: non_empty(&c.accepted_output_modes),
                blocking: Some(!c.return_immediately),
                history_length: c.history_length,
                push_notification_config: c
                    .task_push_notification_config
                    .as_ref()
                    .map(|p| push_config_from_v1(p).push_notification_config),
            }),
        metadata: request.metadata.clone(),
    }
}

fn security_from_v1(
    requirements: &[wire::SecurityRequirement],
) -> Vec<BTreeMap<String, Vec<String>>> {
    requirements
        .iter()
        .map(|r| {
            r.schemes
                .iter()
                .map(|(k, v)| (k.clone(), v.list.clone()))
                .collect()
        })
        .collect()
}

fn security_to_v1(security: &[BTreeMap<String, Vec<String>>]) -> Vec<wire::SecurityRequirement> {
    security
        .iter()
        .map(|r| wire::SecurityRequirement {
            schemes: r
                .iter()
                .map(|(k, v)| (k.clone(), wire::StringList { list: v.clone() }))
                .collect(),
        })
        .collect()
}

fn scheme_from_v1(scheme: &wire::SecurityScheme) -> Option<SecurityScheme> {
    if let Some(s) = &scheme.http_auth_security_scheme {
        return Some(SecurityScheme::Http {
            scheme: s.scheme.clone(),
            bearer_format: s.bearer_format.clone(),
            description: s.description.clone(),
        });
    }
    if let Some(s) = &scheme.api_key_security_scheme {
        return Some(SecurityScheme::ApiKey {
            location: s.location.clone(),
            name: s.name.clone(),
            description: s.description.clone(),
        });
    }
    if let Some(s) = &scheme.open_id_connect_security_scheme {
        return Some(SecurityScheme::OpenIdConnect {
            open_id_connect_url: s.open_id_connect_url.clone(),
            description: s.description.clone(),
        });
    }
    if let Some(flows) = &scheme.oauth2_security_scheme {
        return Some(SecurityScheme::OAuth2 {
            flows: flows.get("flows").cloned().unwrap_or_default(),
            description: None,
        });
    }
    scheme
        .mtls_security_scheme
        .as_ref()
        .map(|_| SecurityScheme::MutualTls { description: None })
}

fn scheme_to_v1(scheme: &SecurityScheme) -> wire::SecurityScheme {
    let mut out = wire::SecurityScheme::default();
    match scheme {
        SecurityScheme::Http {
            scheme,
            bearer_format,
            description,
        } => {
            out.http_auth_security_scheme = Some(wire::HttpAuthSecurityScheme {
                description: description.clone(),
                scheme: scheme.clone(),
                bearer_format: bearer_format.clone(),
            })
        }
        SecurityScheme::ApiKey {
            location,
            name,
            description,
        } => {
            out.api_key_security_scheme = Some(wire::ApiKeySecurityScheme {
                description: description.clone(),
                location: location.clone(),
                name: name.clone(),
            })
        }
        SecurityScheme::OpenIdConnect {
            open_id_connect_url,
            description,
        } => {
            out.open_id_connect_security_scheme = Some(wire::OpenIdConnectSecurityScheme {
                description: description.clone(),
                open_id_connect_url: open_id_connect_url.clone(),
            })
        }
        SecurityScheme::OAuth2 { flows, .. } => {
            out.oauth2_security_scheme = Some(serde_json::json!({ "flows": flows }))
        }
        SecurityScheme::MutualTls { .. } => out.mtls_security_scheme = Some(serde_json::json!({})),
    }
    out
}

/// The 0.3 card of a 1.0 card: its first interface of a 0.3 version (or without one)
/// becomes `url` + `preferredTransport`, the others `additionalInterfaces`. `None` when
/// the card offers no 0.3 interface.
pub fn card_from_v1(card: &wire::AgentCard) -> Option<AgentCard> {
    let legacy: Vec<&wire::AgentInterface> = card
        .supported_interfaces
        .iter()
        .filter(|i| {
            i.protocol_version.is_empty()
                || wire::major_minor(&i.protocol_version) == PROTOCOL_VERSION
        })
        .collect();
    let (first, rest) = legacy.split_first()?;
    let security_schemes: BTreeMap<String, SecurityScheme> = card
        .security_schemes
        .iter()
        .filter_map(|(name, scheme)| scheme_from_v1(scheme).map(|s| (name.clone(), s)))
        .collect();
    Some(AgentCard {
        name: card.name.clone(),
        description: card.description.clone(),
        url: first.url.clone(),
        version: card.version.clone(),
        protocol_version: Some(if first.protocol_version.is_empty() {
            PROTOCOL_VERSION.to_owned()
        } else {
            first.protocol_version.clone()
        }),
        preferred_transport: Some(first.protocol_binding.clone()),
        additional_interfaces: (!rest.is_empty()).then(|| {
            rest.iter()
                .map(|i| AgentInterface {
                    url: i.url.clone(),
                    transport: i.protocol_binding.clone(),
                })
                .collect()
        }),
        capabilities: AgentCapabilities {
            streaming: card.capabilities.streaming,
            push_notifications: card.capabilities.push_notifications,
            state_transition_history: None,
        },
        default_input_modes: card.default_input_modes.clone(),
        default_output_modes: card.default_output_modes.clone(),
        skills: card
            .skills
            .iter()
            .map(|s| AgentSkill {
                id: s.id.clone(),
                name: s.name.clone(),
                description: s.description.clone(),
                tags: s.tags.clone(),
                examples: non_empty(&s.examples),
                input_modes: non_empty(&s.input_modes),
                output_modes: non_empty(&s.output_modes),
                security: (!s.security_requirements.is_empty())
                    .then(|| security_from_v1(&s.security_requirements)),
            })
            .collect(),
        security_schemes: (!security_schemes.is_empty()).then_some(security_schemes),
        security: (!card.security_requirements.is_empty())
            .then(|| security_from_v1(&card.security_requirements)),
        provider: card.provider.clone(),
        documentation_url: card.documentation_url.clone(),
        icon_url: card.icon_url.clone(),
    })
}

/// The 1.0 card of a 0.3 card: `url` + `preferredTransport` (default JSON-RPC) first,
/// then the additional interfaces, all of the card's protocol version.
pub fn card_to_v1(card: &AgentCard) -> wire::AgentCard {
    let version = card
        .protocol_version
        .clone()
        .unwrap_or_else(|| CARD_PROTOCOL_VERSION.to_owned());
    let mut interfaces = vec![wire::AgentInterface {
        url: card.url.clone(),
        protocol_binding: card
            .preferred_transport
            .clone()
            .unwrap_or_else(|| wire::BINDING_JSONRPC.to_owned()),
        tenant: None,
        protocol_version: version.clone(),
    }];
    interfaces.extend(
        card.additional_interfaces
            .iter()
            .flatten()
            .map(|i| wire::AgentInterface {
                url: i.url.clone(),
                protocol_binding: i.transport.clone(),
                tenant: None,
                protocol_version: version.clone(),
            }),
    );
    wire::AgentCard {
        name: card.name.clone(),
        description: card.description.clone(),
        supported_interfaces: interfaces,
        provider: card.provider.clone(),
        version: card.version.clone(),
        documentation_url: card.documentation_url.clone(),
        capabilities: wire::AgentCapabilities {
            streaming: card.capabilities.streaming,
            push_notifications: card.capabilities.push_notifications,
            extensions: Vec::new(),
            extended_agent_card: None,
        },
        security_schemes: card
            .security_schemes
            .iter()
            .flatten()
            .map(|(name, scheme)| (name.clone(), scheme_to_v1(scheme)))
            .collect(),
        security_requirements: security_to_v1(card.security.as_deref().unwrap_or_default()),
        default_input_modes: card.default_input_modes.clone(),
        default_output_modes: card.default_output_modes.clone(),
        skills: card
            .skills
            .iter()
            .map(|s| wire::AgentSkill {
                id: s.id.clone(),
                name: s.name.clone(),
                description: s.description.clone(),
                tags: s.tags.clone(),
                examples: s.examples.clone().unwrap_or_default(),
                input_modes: s.input_modes.clone().unwrap_or_default(),
                output_modes: s.output_modes.clone().unwrap_or_default(),
                security_requirements: security_to_v1(s.security.as_deref().unwrap_or_default()),
            })
            .collect(),
        icon_url: card.icon_url.clone(),
    }
}

/// A card any client reads, as the SDK's server publishes it: the 1.0 card, with the
/// 0.3 card's fields merged in where 1.0 has none (`url`, `preferredTransport`,
/// `protocolVersion`, `security`, and `type` + flat fields inside each security scheme).
pub fn dual_card(card: &wire::AgentCard) -> Value {
    let mut v1 = serde_json::to_value(card).unwrap_or_default();
    if let Some(legacy) = card_from_v1(card) {
        let legacy = serde_json::to_value(legacy).unwrap_or_default();
        merge(&mut v1, &legacy);
    }
    v1
}

/// Adds `from`'s keys that `into` lacks, recursively into objects and into the objects
/// of lists at the same index (the SDK's `agent_card_to_dict` merge).
fn merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(into), Value::Object(from)) => {
            for (key, value) in from {
                match into.get_mut(key) {
                    None => {
                        into.insert(key.clone(), value.clone());
                    }
                    Some(existing) => merge(existing, value),
                }
            }
        }
        (Value::Array(into), Value::Array(from)) => {
            for (a, b) in into.iter_mut().zip(from) {
                if a.is_object() && b.is_object() {
                    merge(a, b);
                }
            }
        }
        _ => {}
    }
}
