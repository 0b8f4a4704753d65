//! The OpenAPI document (`GET /openapi.json`), generated from the handlers.
//!
//! Each handler's `#[utoipa::path]` gives its path, parameters, body and the responses
//! specific to it; `utoipa-axum` collects them while the routes are registered, so a
//! route cannot exist without its entry. [`complete`] then adds what whole classes of
//! endpoints share, from the same facts the middleware acts on: the `X-Client-ID`
//! header and the bearer requirement on `/v1/*` (the latter only when a token is
//! configured), and the error responses any such endpoint can give (400, 401, 404 for
//! ids, 413/415 for bodies, 500). Every error response is the one envelope.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa::OpenApi;
use utoipa::openapi::path::{Operation, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Required, ResponseBuilder};

use crate::AppState;
use crate::auth::{CLIENT_ID_PATTERN, MAX_CLIENT_ID_CHARS};
use crate::body::EventView;
use crate::error::ErrorEnvelope;
use crate::routes::tags;

/// The name of the bearer security scheme.
const BEARER: &str = "bearer";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "agentplane",
        description = "Threads and turns of agentplane's agents over HTTP, with turns \
            streamed as Server-Sent Events. Every error is `{\"error\":{\"code\",\"message\",\"details\"}}`. \
            `/v1/*` requires `X-Client-ID`; each thread belongs to one client and another \
            client's thread is 404.",
        license(name = "Apache-2.0", identifier = "Apache-2.0")
    ),
    components(schemas(ErrorEnvelope, EventView)),
    tags(
        (name = tags::SYSTEM, description = "Health and this document."),
        (name = tags::AGENTS, description = "The agents and their models."),
        (name = tags::THREADS, description = "Threads, their history and compaction."),
        (name = tags::TURNS, description = "Turns and their event streams."),
        (name = tags::PERMISSIONS, description = "Decisions on tool calls that wait for a person."),
        (name = tags::APPROVALS, description = "Tool calls held by an approval policy: approve, edit or reject."),
        (name = tags::POLICIES, description = "The policies in force and the latest reload."),
        (name = tags::COSTS, description = "What model calls cost, grouped."),
        (name = tags::MCP, description = "The MCP gateway's log of tool calls."),
        (name = tags::EXECUTIONS, description = "Turns run asynchronously: queue, poll, cancel, webhooks."),
        (name = tags::VERSIONS, description = "Agent versions: promotion, traffic splits, rollback, shadow runs."),
        (name = tags::KEYS, description = "API keys, each bound to a client and roles (admins only)."),
    )
)]
struct ApiDoc;

/// The document before routes are added.
pub(crate) fn base() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// This document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    operation_id = "getOpenApi",
    tag = tags::SYSTEM,
    responses((status = 200, description = "The OpenAPI document of this server.", body = serde_json::Value))
)]
pub(crate) async fn document(State(state): State<AppState>) -> Response {
    let json = state
        .openapi
        .get()
        .cloned()
        .unwrap_or_else(|| Bytes::from_static(b"{}"));
    ([(header::CONTENT_TYPE, "application/json")], json).into_response()
}

/// Adds what whole classes of endpoints share (see the module comment), and the
/// names of the configured agents as the values `POST /v1/threads` accepts.
pub(crate) fn complete(
    doc: &mut utoipa::openapi::OpenApi,
    token_required: bool,
    agents: Vec<String>,
) {
    let components = doc.components.get_or_insert_with(Default::default);
    components.security_schemes.insert(
        BEARER.to_owned(),
        RefOr::T(SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer))),
    );
    let agent_names: Vec<serde_json::Value> =
        agents.into_iter().map(serde_json::Value::from).collect();
    for body in ["CreateThreadBody", "CreateExecutionBody"] {
        if let Some(RefOr::T(Schema::Object(body))) = components.schemas.get_mut(body)
            && let Some(RefOr::T(Schema::Object(agent))) = body.properties.get_mut("agent")
        {
            agent.enum_values = Some(agent_names.clone());
        }
    }
    for (path, item) in doc.paths.paths.iter_mut() {
        let versioned = path.starts_with("/v1/");
        let has_id = path.contains('{');
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for operation in operations.into_iter().flatten() {
            let has_body = operation.request_body.is_some();
            name_agents(operation, &agent_names);
            if versioned {
                add_client_header(operation);
                add_error(
                    operation,
                    400,
                    "Invalid input, or `X-Client-ID` is missing or malformed.",
                );
                if token_required {
                    operation.security =
                        Some(vec![SecurityRequirement::new(BEARER, Vec::<String>::new())]);
                    add_error(operation, 401, "The bearer token is missing or not valid.");
                }
            }
            if has_id {
                add_error(
                    operation,
                    404,
                    "No such resource for this client (also for a malformed id).",
                );
            }
            if has_body {
                add_error(
                    operation,
                    400,
                    "The body is not valid JSON of the expected shape.",
                );
                add_error(
                    operation,
                    413,
                    "The body is larger than the server accepts.",
                );
                add_error(operation, 415, "The body is not `application/json`.");
            }
            add_error(
                operation,
                500,
                "An internal error; details are in the server log.",
            );
        }
    }
}

/// An `{agent}` path parameter (agent versions) takes the configured agents' names.
fn name_agents(operation: &mut Operation, agents: &[serde_json::Value]) {
    for parameter in operation.parameters.iter_mut().flatten() {
        if let RefOr::T(parameter) = parameter
            && parameter.name == "agent"
            && parameter.parameter_in == ParameterIn::Path
        {
            parameter.schema = Some(RefOr::T(Schema::Object(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .enum_values(Some(agents.to_vec()))
                    .build(),
            )));
        }
    }
}

fn add_client_header(operation: &mut Operation) {
    let header = ParameterBuilder::new()
        .name("X-Client-ID")
        .parameter_in(ParameterIn::Header)
        .required(Required::True)
        .description(Some(
            "The calling client: owns the threads it creates. 1 to 128 characters of \
             `[A-Za-z0-9._:@-]`.",
        ))
        .schema(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .max_length(Some(MAX_CLIENT_ID_CHARS))
                .pattern(Some(CLIENT_ID_PATTERN)),
        ))
        .build();
    operation
        .parameters
        .get_or_insert_with(Vec::new)
        .insert(0, RefOr::T(header));
}

/// Adds an error response unless the handler documented that status itself.
fn add_error(operation: &mut Operation, status: u16, description: &str) {
    let responses = &mut operation.responses.responses;
    let key = status.to_string();
    if responses.contains_key(&key) {
        return;
    }
    let response = ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorEnvelope")))
                .build(),
        )
        .build();
    responses.insert(key, RefOr::T(response));
}
