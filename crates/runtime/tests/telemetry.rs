//! The telemetry seam's spans as a `tracing` layer sees them (what an OpenTelemetry
//! exporter would be given): a real turn with a tool call against the scripted model
//! over HTTP and a gateway call, each span with its OpenTelemetry GenAI attributes and
//! nested where it happens (the model and tool calls inside their turn).
//!
//! Its own test binary: the capturing layer is the process's global subscriber.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use agentplane_core::{ChatMessage, ChatRequest};
use agentplane_engine::NoObserver;
use agentplane_runtime::config::ConfigSource;
use agentplane_runtime::{Config, Runtime, Task};
use agentplane_testkit::{Scenario, ScriptedServer, Step};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// A span as the layer saw it: its name, its parent's name, its fields.
#[derive(Debug, Clone, Default)]
struct Seen {
    name: String,
    parent: Option<String>,
    fields: BTreeMap<String, String>,
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<BTreeMap<u64, Seen>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut seen = Seen {
            name: attrs.metadata().name().to_owned(),
            parent: ctx
                .span(id)
                .and_then(|span| span.parent().map(|p| p.name().to_owned())),
            fields: BTreeMap::new(),
        };
        attrs.record(&mut Fields(&mut seen.fields));
        self.0.lock().expect("lock").insert(id.into_u64(), seen);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        if let Some(seen) = self.0.lock().expect("lock").get_mut(&id.into_u64()) {
            values.record(&mut Fields(&mut seen.fields));
        }
    }
}

impl Capture {
    fn named(&self, name: &str) -> Vec<Seen> {
        self.0
            .lock()
            .expect("lock")
            .values()
            .filter(|s| s.name == name)
            .cloned()
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_model_calls_tool_calls_and_gateway_calls_are_spans_with_genai_attributes() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");

    let server = ScriptedServer::start(Scenario::new(vec![
        Step::tool_call("list_files", json!({})).with_usage(20, 5),
        Step::tool_call("finish_task", json!({"summary": "done"})).with_usage(30, 6),
        Step::text("hello from the gateway").with_usage(7, 3),
        // A small model's call written as text: recovered for the gateway client.
        Step::text(r#"{"name": "get_weather", "arguments": {"city": "Paris"}}"#),
    ]))
    .await
    .expect("scripted server");
    let dir = tempfile::tempdir().expect("tempdir");
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).expect("workspace");
    let file = dir.path().join("agentplane.toml");
    std::fs::write(
        &file,
        format!(
            "[llm]\nbase_url = \"{}\"\nmodel = \"scripted-model\"\n\
             [store]\npath = \"t.db\"\n\
             [agents.lister]\nsystem_prompt = \"List files.\"\nensembles = [\"fs\"]\n",
            server.base_url()
        ),
    )
    .expect("config");
    let env = |_: &str| None;
    let config = Config::load_from(&ConfigSource {
        explicit: Some(&file),
        cwd: dir.path(),
        env: &env,
    })
    .expect("config loads");
    let runtime = Runtime::start(config).await.expect("runtime starts");

    let outcome = runtime
        .run_task(
            Task {
                agent: "lister".into(),
                workspace: workspace.clone(),
                input: "What is here?".into(),
            },
            &NoObserver,
            CancellationToken::new(),
        )
        .await
        .expect("turn runs");
    assert!(outcome.stop_reason.is_success(), "{outcome:?}");

    let turns = capture.named("agentplane.turn");
    assert_eq!(turns.len(), 1, "{turns:?}");
    let turn = &turns[0];
    assert_eq!(turn.fields["gen_ai.agent.name"], "lister");
    assert_eq!(turn.fields["agentplane.turn"], outcome.turn.to_string());
    assert_eq!(turn.fields["agentplane.stop_reason"], "finished");

    let calls = capture.named("gen_ai.chat");
    assert_eq!(calls.len(), 2, "{calls:?}");
    for (call, (input, output)) in calls.iter().zip([(20, 5), (30, 6)]) {
        assert_eq!(call.parent.as_deref(), Some("agentplane.turn"), "{call:?}");
        assert_eq!(call.fields["gen_ai.request.model"], "scripted-model");
        assert_eq!(call.fields["gen_ai.usage.input_tokens"], input.to_string());
        assert_eq!(
            call.fields["gen_ai.usage.output_tokens"],
            output.to_string()
        );
        assert_eq!(call.fields["agentplane.outcome"], "answered");
        assert!(
            call.fields.contains_key("agentplane.cost_usd_micros"),
            "{call:?}"
        );
    }

    let tools = capture.named("agentplane.tool_call");
    let listed: Vec<&Seen> = tools
        .iter()
        .filter(|t| t.fields["gen_ai.tool.name"] == "list_files")
        .collect();
    assert_eq!(listed.len(), 1, "{tools:?}");
    assert_eq!(listed[0].parent.as_deref(), Some("agentplane.turn"));
    assert_eq!(listed[0].fields["agentplane.status"], "ok");

    let reply = gateway_call(&runtime, "hi", Vec::new()).await;
    let gateway = capture.named("agentplane.gateway_call");
    assert_eq!(gateway.len(), 1, "{gateway:?}");
    assert_eq!(gateway[0].fields["agentplane.client"], "someone");
    assert_eq!(
        gateway[0].fields["agentplane.completion"],
        reply.id.as_str()
    );
    let inside: Vec<Seen> = capture
        .named("gen_ai.chat")
        .into_iter()
        .filter(|c| c.parent.as_deref() == Some("agentplane.gateway_call"))
        .collect();
    assert_eq!(inside.len(), 1, "{inside:?}");
    assert_eq!(inside[0].fields["gen_ai.usage.output_tokens"], "3");
    assert!(
        !gateway[0]
            .fields
            .contains_key("agentplane.tool_calls_recovered")
    );

    let weather = agentplane_core::ToolSpec {
        name: "get_weather".into(),
        description: String::new(),
        parameters: json!({"type": "object"}),
        side_effects: false,
    };
    let reply = gateway_call(&runtime, "weather?", vec![weather]).await;
    assert_eq!(reply.response.tool_calls.len(), 1, "{reply:?}");
    let gateway = capture.named("agentplane.gateway_call");
    assert_eq!(gateway.len(), 2, "{gateway:?}");
    assert_eq!(gateway[1].fields["agentplane.tool_calls_recovered"], "1");
    runtime.shutdown().await;
}

/// One gateway call of `someone` asking `text`, offering `tools`, answered.
async fn gateway_call(
    runtime: &Runtime,
    text: &str,
    tools: Vec<agentplane_core::ToolSpec>,
) -> agentplane_engine::gateway::GatewayReply {
    let call = runtime
        .services()
        .model_gateway
        .call(
            "someone",
            agentplane_engine::gateway::GatewayRoute::ChatCompletions,
            ChatRequest {
                model: "scripted-model".into(),
                messages: vec![ChatMessage::user(text)],
                tools,
                temperature: None,
                max_tokens: None,
                tool_choice: None,
                response_schema: None,
            },
        )
        .await
        .expect("admitted");
    call.call(&mut |_: &str| {}).await.expect("answered")
}
