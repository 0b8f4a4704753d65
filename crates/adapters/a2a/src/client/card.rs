//! A remote agent's Agent Card, read into what the client needs: the JSON-RPC endpoint,
//! the protocol version to speak there (1.0 preferred; 0.3 when the card offers only
//! that), whether it streams, and where the credential goes.
//!
//! A card is checked before anything is sent: a JSON-RPC interface must be offered, its
//! URL must be http(s), and a card fetched over https may not send us to plain http
//! (the credential would travel in clear).

use serde_json::Value;
use url::Url;

use crate::v0_3;
use crate::wire::{AgentCard, BINDING_JSONRPC, SecurityScheme, major_minor};

/// The protocol generation spoken to a remote agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1_0,
    V0_3,
}

impl Version {
    /// As the `a2a_request` event and the `A2A-Version` header write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V1_0 => "1.0",
            Self::V0_3 => "0.3",
        }
    }
}

/// Where the credential goes, as the card declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// `Authorization: Bearer KEY` (HTTP bearer; also what OAuth 2 and OpenID Connect
    /// schemes take, and the default when the card declares no scheme).
    Bearer,
    /// An API key in the named header.
    Header(String),
    /// An API key in the named query parameter.
    Query(String),
    /// An API key in the named cookie.
    Cookie(String),
}

/// What the client keeps of a card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remote {
    /// The card's name for the agent.
    pub name: String,
    /// The JSON-RPC endpoint.
    pub endpoint: Url,
    pub version: Version,
    /// Whether to use `SendStreamingMessage` (else `SendMessage`).
    pub streaming: bool,
    pub placement: Placement,
    /// The interface's tenant, sent in every request's params (1.0).
    pub tenant: Option<String>,
}

/// Reads a card fetched from `card_url`: a 1.0 card (`supportedInterfaces`), else a
/// 0.3 card (`url`, `preferredTransport`, `additionalInterfaces`) seen as 1.0.
pub fn read(card: Value, card_url: &Url) -> Result<Remote, String> {
    if !card.is_object() {
        return Err("the Agent Card is not a JSON object".to_owned());
    }
    let card: AgentCard = if card.get("supportedInterfaces").is_some() {
        serde_json::from_value(card)
            .map_err(|e| format!("the Agent Card is not valid A2A 1.0: {e}"))?
    } else {
        let legacy: v0_3::AgentCard = serde_json::from_value(card)
            .map_err(|e| format!("the Agent Card is not valid A2A (1.0 or 0.3): {e}"))?;
        v0_3::card_to_v1(&legacy)
    };
    read_card(&card, card_url)
}

/// The card's JSON-RPC interface (1.0 first, then 0.3) and where its credential goes.
fn read_card(card: &AgentCard, card_url: &Url) -> Result<Remote, String> {
    let chosen = [Version::V1_0, Version::V0_3].into_iter().find_map(|v| {
        card.supported_interfaces
            .iter()
            .find(|i| {
                i.protocol_binding.eq_ignore_ascii_case(BINDING_JSONRPC)
                    && major_minor(&i.protocol_version) == v.as_str()
            })
            .map(|i| (v, i))
    });
    let Some((version, interface)) = chosen else {
        return Err("the Agent Card offers no JSON-RPC interface of protocol 1.0 or 0.3".into());
    };
    let schemes: Vec<(&String, &SecurityScheme)> = card.security_schemes.iter().collect();
    let required: Vec<&String> = card
        .security_requirements
        .iter()
        .flat_map(|r| r.schemes.keys())
        .collect();
    let placement = pick(&required, &schemes, |scheme| {
        if let Some(key) = &scheme.api_key_security_scheme {
            return api_key(&key.location, &key.name);
        }
        if scheme.http_auth_security_scheme.is_some()
            || scheme.oauth2_security_scheme.is_some()
            || scheme.open_id_connect_security_scheme.is_some()
        {
            return Some(Placement::Bearer);
        }
        None
    });
    Ok(Remote {
        name: card.name.clone(),
        endpoint: endpoint(&interface.url, card_url)?,
        version,
        streaming: card.capabilities.streaming.unwrap_or(false),
        placement,
        tenant: interface.tenant.clone().filter(|t| !t.is_empty()),
    })
}

/// The placement of the first scheme the card requires that we can fill, else of the
/// first it declares, else bearer.
fn pick<S>(
    required: &[&String],
    schemes: &[(&String, S)],
    placement: impl Fn(&S) -> Option<Placement>,
) -> Placement {
    let by_name = |name: &String| {
        schemes
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, s)| placement(s))
    };
    required
        .iter()
        .find_map(|name| by_name(name))
        .or_else(|| schemes.iter().find_map(|(_, s)| placement(s)))
        .unwrap_or(Placement::Bearer)
}

fn api_key(location: &str, name: &str) -> Option<Placement> {
    if name.is_empty() {
        return None;
    }
    match location.to_ascii_lowercase().as_str() {
        "header" => Some(Placement::Header(name.to_owned())),
        "query" => Some(Placement::Query(name.to_owned())),
        "cookie" => Some(Placement::Cookie(name.to_owned())),
        _ => None,
    }
}

/// The interface URL, resolved against the card's, checked.
fn endpoint(url: &str, card_url: &Url) -> Result<Url, String> {
    let endpoint = card_url
        .join(url)
        .map_err(|e| format!("the Agent Card's interface URL is not a URL: {e}"))?;
    if !matches!(endpoint.scheme(), "http" | "https") {
        return Err("the Agent Card's interface URL is not http or https".to_owned());
    }
    if card_url.scheme() == "https" && endpoint.scheme() == "http" {
        return Err(
            "the Agent Card, fetched over https, points to a plain http interface; refused \
             (the credential would travel in clear)"
                .to_owned(),
        );
    }
    if !endpoint.username().is_empty() || endpoint.password().is_some() {
        return Err("the Agent Card's interface URL carries credentials".to_owned());
    }
    Ok(endpoint)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn card_url() -> Url {
        Url::parse("http://127.0.0.1:9/.well-known/agent-card.json").expect("url")
    }

    #[test]
    fn a_1_0_card_prefers_1_0_and_its_required_api_key_header() {
        let card = json!({
            "name": "peer", "description": "d", "version": "1",
            "supportedInterfaces": [
                {"url": "http://127.0.0.1:9/v03", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
                {"url": "/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0.1"}
            ],
            "capabilities": {"streaming": true},
            "securitySchemes": {
                "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}},
                "key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Key"}}
            },
            "securityRequirements": [{"schemes": {"key": {}}}],
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"]
        });
        let remote = read(card, &card_url()).expect("a card");
        assert_eq!(remote.version, Version::V1_0);
        assert_eq!(remote.endpoint.as_str(), "http://127.0.0.1:9/rpc");
        assert!(remote.streaming);
        assert_eq!(remote.placement, Placement::Header("X-Key".into()));
    }

    #[test]
    fn a_0_3_card_is_spoken_to_in_0_3() {
        let card = json!({
            "name": "old", "description": "d", "version": "1", "url": "http://127.0.0.1:9/",
            "protocolVersion": "0.3.0", "capabilities": {},
            "securitySchemes": {"b": {"type": "http", "scheme": "bearer"}},
            "security": [{"b": []}],
            "defaultInputModes": [], "defaultOutputModes": [], "skills": []
        });
        let remote = read(card, &card_url()).expect("a card");
        assert_eq!(remote.version, Version::V0_3);
        assert!(!remote.streaming);
        assert_eq!(remote.placement, Placement::Bearer);
    }

    #[test]
    fn cards_without_json_rpc_or_with_a_downgrade_are_refused() {
        let grpc_only = json!({
            "name": "g", "description": "d", "version": "1",
            "supportedInterfaces": [{"url": "http://h/", "protocolBinding": "GRPC", "protocolVersion": "1.0"}],
            "capabilities": {}, "defaultInputModes": [], "defaultOutputModes": []
        });
        assert!(read(grpc_only, &card_url()).is_err());
        let https = Url::parse("https://h/.well-known/agent-card.json").expect("url");
        let downgrade = json!({
            "name": "d", "description": "d", "version": "1",
            "supportedInterfaces": [{"url": "http://h/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "capabilities": {}, "defaultInputModes": [], "defaultOutputModes": []
        });
        assert!(read(downgrade, &https).unwrap_err().contains("plain http"));
        assert!(read(json!([1]), &card_url()).is_err());
        assert!(read(json!({"name": "x"}), &card_url()).is_err());
    }
}
