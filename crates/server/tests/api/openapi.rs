//! The OpenAPI document lists every route with its contract and the error envelope.

use std::collections::BTreeSet;

use reqwest::StatusCode;
use serde_json::Value;

use crate::harness::{Setup, TOKEN};

const ROUTES: &[(&str, &str)] = &[
    ("get", "/healthz"),
    ("get", "/openapi.json"),
    ("get", "/v1/agents"),
    ("post", "/v1/threads"),
    ("get", "/v1/threads"),
    ("get", "/v1/threads/{id}"),
    ("delete", "/v1/threads/{id}"),
    ("post", "/v1/threads/{id}/turns"),
    ("get", "/v1/threads/{id}/events"),
    ("get", "/v1/threads/{id}/history"),
    ("get", "/v1/threads/{id}/audit"),
    ("post", "/v1/threads/{id}/compact"),
    ("post", "/v1/turns/{id}/cancel"),
    ("post", "/v1/permissions/{id}"),
    ("get", "/v1/approvals"),
    ("get", "/v1/approvals/{id}"),
    ("post", "/v1/approvals/{id}"),
    ("get", "/v1/policies"),
    ("post", "/v1/policies/explain"),
    ("get", "/v1/costs"),
    ("get", "/v1/mcp/calls"),
    ("get", "/v1/mcp/servers"),
    ("get", "/v1/mcp/tools"),
    ("post", "/v1/mcp/tools/{server}/{tool}/approve"),
    ("post", "/v1/executions"),
    ("get", "/v1/executions"),
    ("get", "/v1/executions/{id}"),
    ("post", "/v1/executions/{id}/cancel"),
    ("get", "/v1/agents/{agent}/versions"),
    ("post", "/v1/agents/{agent}/versions"),
    ("get", "/v1/agents/{agent}/versions/{version}"),
    ("patch", "/v1/agents/{agent}/versions/{version}"),
    ("post", "/v1/agents/{agent}/versions/{version}/promote"),
    ("put", "/v1/agents/{agent}/traffic"),
    ("post", "/v1/agents/{agent}/traffic/rollback"),
    ("put", "/v1/agents/{agent}/shadow"),
    ("get", "/v1/threads/{id}/shadows"),
    ("post", "/v1/keys"),
    ("get", "/v1/keys"),
    ("post", "/v1/keys/{id}/revoke"),
];

async fn document(token: Option<&'static str>) -> Value {
    let mut setup = Setup::new(vec![]);
    if let Some(token) = token {
        setup = setup.token(token);
    }
    let api = setup.start().await;
    // Public: no token, no client id.
    let response = api
        .http
        .get(api.url("/openapi.json"))
        .send()
        .await
        .expect("doc");
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.expect("json")
}

#[tokio::test]
async fn the_document_lists_every_route_and_nothing_else() {
    let doc = document(None).await;
    assert!(
        doc["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.1"))
    );
    let mut listed = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("item").keys() {
            if ["get", "post", "put", "delete", "patch"].contains(&method.as_str()) {
                listed.insert((method.clone(), path.clone()));
            }
        }
    }
    let expected: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
        .collect();
    assert_eq!(listed, expected);
    let ids: Vec<&str> = ROUTES
        .iter()
        .filter_map(|(m, p)| doc["paths"][p][m]["operationId"].as_str())
        .collect();
    let unique: BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(
        (ids.len(), unique.len()),
        (ROUTES.len(), ROUTES.len()),
        "{ids:?}"
    );
}

#[tokio::test]
async fn every_v1_operation_has_the_client_header_and_the_envelope_for_errors() {
    let doc = document(Some(TOKEN)).await;
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"],
        serde_json::json!({"type": "http", "scheme": "bearer"})
    );
    let envelope = &doc["components"]["schemas"]["ErrorEnvelope"];
    assert_eq!(envelope["required"], serde_json::json!(["error"]));
    for (method, path) in ROUTES {
        let operation = &doc["paths"][path][method];
        let responses = operation["responses"].as_object().expect("responses");
        for (status, response) in responses {
            if status.starts_with('4') || status.starts_with('5') {
                assert_eq!(
                    response["content"]["application/json"]["schema"]["$ref"],
                    "#/components/schemas/ErrorEnvelope",
                    "{method} {path} {status}"
                );
            }
        }
        assert!(responses.contains_key("500"), "{method} {path}");
        let header = operation["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == "X-Client-ID");
        if path.starts_with("/v1/") {
            let header = header.unwrap_or_else(|| panic!("{method} {path} has X-Client-ID"));
            assert_eq!(header["in"], "header");
            assert_eq!(header["required"], true);
            assert_eq!(operation["security"], serde_json::json!([{"bearer": []}]));
            for status in ["400", "401"] {
                assert!(responses.contains_key(status), "{method} {path} {status}");
            }
        } else {
            assert!(header.is_none() && operation.get("security").is_none());
        }
        if path.contains("{id}") {
            assert!(responses.contains_key("404"), "{method} {path}");
        }
        if operation.get("requestBody").is_some() {
            for status in ["413", "415"] {
                assert!(responses.contains_key(status), "{method} {path} {status}");
            }
        }
    }
    let turns = &doc["paths"]["/v1/threads/{id}/turns"]["post"]["responses"];
    assert!(
        turns["200"]["content"]["text/event-stream"].is_object(),
        "{turns}"
    );
    assert!(turns["409"].is_object());
}

#[tokio::test]
async fn without_a_token_no_operation_claims_to_need_one() {
    let doc = document(None).await;
    for (method, path) in ROUTES {
        let operation = &doc["paths"][path][method];
        assert!(operation.get("security").is_none(), "{method} {path}");
        // The first key needs the setup token on such a server: its own 401.
        let setup = (*method, *path) == ("post", "/v1/keys");
        assert_eq!(
            operation["responses"].get("401").is_some(),
            setup,
            "{method} {path}"
        );
    }
    let create = &doc["paths"]["/v1/keys"]["post"];
    let header = create["parameters"]
        .as_array()
        .and_then(|all| all.iter().find(|p| p["name"] == "X-Setup-Token"));
    assert!(
        header.is_some_and(|h| h["in"] == "header" && h["required"] == false),
        "{create}"
    );
}
