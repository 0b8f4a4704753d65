//! The command line as a client of a running `agentplane serve`: where the server is,
//! who is asking, a GET or a POST, and how its failures read. Used by `threads`,
//! `history`, `approvals`, and `keys` beside a server that holds the store.
//!
//! Only the HTTP exchange and the error envelope live here; what a command prints
//! lives in the command. Nothing here opens the event store: a client sees exactly
//! what the server's API shows, tenancy included.

use std::time::Duration;

use agentplane_core::ErrorCode;
use agentplane_core::identity::{SETUP_TOKEN_HEADER, SetupToken};
use agentplane_runtime::LOCAL_CLIENT;
use clap::Args;
use serde_json::Value;

use crate::exit::{self, Exit};

/// Where `agentplane serve` listens unless told otherwise.
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:8686";

/// The environment variable holding the bearer token for `/v1/*`.
const TOKEN_VARIABLE: &str = "AGENTPLANE_AUTH_TOKEN";

/// How long a client waits to connect, and for a whole answer.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The flags every client command shares.
#[derive(Args, Debug, Clone)]
pub struct ServerArgs {
    /// The running server's URL.
    #[arg(long, env = "AGENTPLANE_SERVER", default_value = DEFAULT_SERVER, value_name = "URL")]
    server: String,
    /// Whose threads to see: the `X-Client-ID` sent (default `local`, the client
    /// `agentplane run` records). With a key, the key's client unless named here.
    #[arg(long, env = "AGENTPLANE_CLIENT_ID", value_name = "ID")]
    client_id: Option<String>,
    /// An API key (`ap_…`) to send instead of `AGENTPLANE_AUTH_TOKEN`; it acts as its
    /// own client.
    #[arg(
        long,
        env = "AGENTPLANE_KEY",
        value_name = "KEY",
        hide_env_values = true
    )]
    key: Option<String>,
}

impl ServerArgs {
    /// These flags with the server `config` runs when `--server` (and
    /// `AGENTPLANE_SERVER`) left the default: the address the running server recorded
    /// beside the store (`server_address`), else `[server] listen`.
    pub fn located(mut self, config: &agentplane_runtime::Config) -> Self {
        use agentplane_runtime::server_address;
        if self.server == DEFAULT_SERVER {
            self.server = server_address::read(config).unwrap_or_else(|| {
                match config.server.listen.parse::<std::net::SocketAddr>() {
                    Ok(addr) => server_address::url_of(addr),
                    Err(_) => format!("http://{}", config.server.listen),
                }
            });
        }
        self
    }

    /// Whether an API key was given (`--key`, `AGENTPLANE_KEY`).
    pub fn has_key(&self) -> bool {
        self.key.as_deref().is_some_and(|k| !k.is_empty())
    }
}

/// Why a request to the server did not give an answer to print. Each variant says
/// what a user can do about it; `code` and `exit` map it like every other failure.
#[derive(Debug)]
pub enum RemoteError {
    /// A bad flag or argument, found before anything was sent.
    Usage(String),
    /// No HTTP answer at all: nothing listens, or the connection broke.
    Unreachable { url: String, detail: String },
    /// The server answered with its error envelope.
    Api { code: String, message: String },
    /// The server answered something that is not the API (a proxy page, bad JSON).
    Unexpected { url: String, detail: String },
}

impl RemoteError {
    /// The code printed in `error [CODE]: …`.
    pub fn code(&self) -> &str {
        match self {
            Self::Usage(_) => ErrorCode::InvalidArgument.as_str(),
            Self::Unreachable { .. } => ErrorCode::UpstreamUnavailable.as_str(),
            Self::Api { code, .. } => code,
            Self::Unexpected { .. } => ErrorCode::Internal.as_str(),
        }
    }

    /// The exit code, by the same table as every other command.
    pub fn exit(&self) -> Exit {
        match self {
            Self::Usage(_) => exit::CONFIG,
            Self::Unreachable { .. } => exit::of_code(ErrorCode::UpstreamUnavailable),
            Self::Api { code, .. } => {
                match serde_json::from_value::<ErrorCode>(Value::String(code.clone())) {
                    Ok(code) => exit::of_code(code),
                    Err(_) => exit::INTERNAL,
                }
            }
            Self::Unexpected { .. } => exit::INTERNAL,
        }
    }

    /// Prints `error [CODE]: message` on stderr and gives the exit code.
    pub fn report(&self) -> Exit {
        eprintln!("error [{}]: {self}", self.code());
        self.exit()
    }
}

impl std::fmt::Display for RemoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Usage(message) | Self::Api { message, .. } => f.write_str(message),
            Self::Unreachable { url, detail } => write!(
                f,
                "cannot reach the agentplane server at {url} ({detail}); start it with \
                 `agentplane serve`, or name another with --server or AGENTPLANE_SERVER"
            ),
            Self::Unexpected { url, detail } => {
                write!(f, "{url} did not answer as an agentplane server: {detail}")
            }
        }
    }
}

/// A connection to one server as one client.
pub struct Remote {
    http: reqwest::Client,
    base: String,
    /// The `X-Client-ID` sent; `None` with a key that names none (the key's own).
    client_id: Option<String>,
    /// The bearer credential: the key, else the token.
    token: Option<String>,
    /// The setup token of a server without keys, for `keys create`.
    setup_token: Option<SetupToken>,
}

impl Remote {
    /// Checks the flags and reads the token from `AGENTPLANE_AUTH_TOKEN`. Sends nothing.
    pub fn new(args: &ServerArgs) -> Result<Self, RemoteError> {
        let base = args.server.trim().trim_end_matches('/').to_owned();
        let rest = base
            .strip_prefix("http://")
            .or_else(|| base.strip_prefix("https://"));
        if rest.is_none_or(|host| host.is_empty() || host.contains(char::is_whitespace)) {
            return Err(RemoteError::Usage(format!(
                "--server must be an http:// or https:// URL such as {DEFAULT_SERVER}, got {:?}",
                args.server
            )));
        }
        let key = args.key.clone().filter(|k| !k.is_empty());
        let client_id = match (&args.client_id, &key) {
            (Some(id), _) => Some(id.clone()),
            (None, Some(_)) => None,
            (None, None) => Some(LOCAL_CLIENT.to_owned()),
        };
        if let Some(id) = &client_id
            && (id.is_empty() || reqwest::header::HeaderValue::from_str(id).is_err())
        {
            return Err(RemoteError::Usage(format!(
                "--client-id must be a non-empty header value, got {id:?}"
            )));
        }
        let (token, source) = match key {
            Some(key) => (Some(key), "--key (AGENTPLANE_KEY)"),
            None => (
                std::env::var(TOKEN_VARIABLE).ok().filter(|t| !t.is_empty()),
                TOKEN_VARIABLE,
            ),
        };
        if let Some(token) = &token
            && reqwest::header::HeaderValue::from_str(&format!("Bearer {token}")).is_err()
        {
            return Err(RemoteError::Usage(format!(
                "{source} is not a valid header value"
            )));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| RemoteError::Unexpected {
                url: base.clone(),
                detail: format!("cannot build an HTTP client: {e}"),
            })?;
        Ok(Self {
            http,
            base,
            client_id,
            token,
            setup_token: None,
        })
    }

    /// This connection, also sending `token` as `X-Setup-Token` (creating the first
    /// key on a server without keys). A token that is no header value is a usage error.
    pub fn with_setup_token(self, token: SetupToken) -> Result<Self, RemoteError> {
        if reqwest::header::HeaderValue::from_str(token.expose()).is_err() {
            return Err(RemoteError::Usage(
                "the setup token file holds no valid header value; restart `agentplane \
                 serve` to write a new one"
                    .to_owned(),
            ));
        }
        Ok(Self {
            setup_token: Some(token),
            ..self
        })
    }

    /// The server's URL, without a trailing slash.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The client id sent (`the key's client` when a key names none).
    pub fn client_id(&self) -> &str {
        self.client_id.as_deref().unwrap_or("the key's client")
    }

    /// The client id and bearer credential as header names and values, for a
    /// connection this client does not make itself (the stdio gateway's relay).
    pub fn headers(&self) -> std::collections::BTreeMap<String, String> {
        let mut headers = std::collections::BTreeMap::new();
        if let Some(id) = &self.client_id {
            headers.insert("X-Client-ID".to_owned(), id.clone());
        }
        if let Some(token) = &self.token {
            headers.insert("Authorization".to_owned(), format!("Bearer {token}"));
        }
        headers
    }

    /// `request` with the client id and the bearer credential, when there are.
    fn authorised(&self, mut request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        if let Some(id) = &self.client_id {
            request = request.header("X-Client-ID", id);
        }
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(setup) = &self.setup_token {
            request = request.header(SETUP_TOKEN_HEADER, setup.expose());
        }
        request
    }

    /// `GET {base}{path}` with the client id and token; the JSON of a 2xx answer.
    pub async fn get(&self, path: &str, query: &[(&str, &str)]) -> Result<Value, RemoteError> {
        let url = format!("{}{path}", self.base);
        let request = self.authorised(self.http.get(&url).query(query));
        self.exchange(url, request).await
    }

    /// `POST {base}{path}` with a JSON body, the client id and token; the JSON of a
    /// 2xx answer.
    pub async fn post(&self, path: &str, body: &Value) -> Result<Value, RemoteError> {
        let url = format!("{}{path}", self.base);
        let request = self.authorised(self.http.post(&url).json(body));
        self.exchange(url, request).await
    }

    /// `PUT {base}{path}` with a JSON body; the JSON of a 2xx answer.
    pub async fn put(&self, path: &str, body: &Value) -> Result<Value, RemoteError> {
        self.send(reqwest::Method::PUT, path, body).await
    }

    /// `PATCH {base}{path}` with a JSON body; the JSON of a 2xx answer.
    pub async fn patch(&self, path: &str, body: &Value) -> Result<Value, RemoteError> {
        self.send(reqwest::Method::PATCH, path, body).await
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &Value,
    ) -> Result<Value, RemoteError> {
        let url = format!("{}{path}", self.base);
        let request = self.authorised(self.http.request(method, &url).json(body));
        self.exchange(url, request).await
    }

    /// Sends a request and reads its answer: the JSON of a 2xx, else the envelope.
    async fn exchange(
        &self,
        url: String,
        request: reqwest::RequestBuilder,
    ) -> Result<Value, RemoteError> {
        let response = request.send().await.map_err(|e| RemoteError::Unreachable {
            url: self.base.clone(),
            detail: plain_cause(&e),
        })?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| RemoteError::Unreachable {
                url: self.base.clone(),
                detail: plain_cause(&e),
            })?;
        let json: Option<Value> = serde_json::from_slice(&body).ok();
        if status.is_success() {
            return json.ok_or_else(|| RemoteError::Unexpected {
                url: url.clone(),
                detail: format!("HTTP {status} with a body that is not JSON"),
            });
        }
        match json.as_ref().and_then(envelope) {
            Some((code, message)) => Err(RemoteError::Api { code, message }),
            None => Err(RemoteError::Unexpected {
                url,
                detail: format!("HTTP {status}: {}", preview(&body)),
            }),
        }
    }
}

/// `(code, message)` of the error envelope `{"error":{"code","message","details"}}`.
fn envelope(body: &Value) -> Option<(String, String)> {
    let error = body.get("error")?;
    let code = error.get("code")?.as_str()?.to_owned();
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Some((code, message))
}

/// The innermost cause of a transport error ("Connection refused"), which says more
/// than reqwest's outer "error sending request".
fn plain_cause(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        return "timed out".to_owned();
    }
    let mut cause: &dyn std::error::Error = error;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    cause.to_string()
}

/// The first 200 characters of a body, on one line.
fn preview(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(200)
        .collect();
    if line.trim().is_empty() {
        "(empty body)".to_owned()
    } else {
        line.trim().to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(server: &str, client_id: &str) -> ServerArgs {
        ServerArgs {
            server: server.to_owned(),
            client_id: Some(client_id.to_owned()),
            key: None,
        }
    }

    #[test]
    fn a_key_is_the_credential_and_names_no_client_unless_told() {
        let with_key = ServerArgs {
            server: DEFAULT_SERVER.to_owned(),
            client_id: None,
            key: Some("ap_k".to_owned()),
        };
        let remote = Remote::new(&with_key).expect("valid");
        assert_eq!(remote.client_id, None);
        assert_eq!(remote.token.as_deref(), Some("ap_k"));
        let without = ServerArgs {
            key: None,
            ..with_key
        };
        assert_eq!(
            Remote::new(&without).expect("valid").client_id.as_deref(),
            Some(LOCAL_CLIENT)
        );
    }

    #[test]
    fn bad_urls_and_client_ids_are_usage_errors() {
        for (server, client) in [
            ("ftp://127.0.0.1:8686", "local"),
            ("127.0.0.1:8686", "local"),
            ("http://", "local"),
            ("http://a b", "local"),
            (DEFAULT_SERVER, ""),
            (DEFAULT_SERVER, "line\nbreak"),
        ] {
            match Remote::new(&args(server, client)) {
                Err(e @ RemoteError::Usage(_)) => assert_eq!(e.exit(), exit::CONFIG),
                Err(other) => panic!("{server} {client:?}: {other}"),
                Ok(_) => panic!("{server} {client:?} was accepted"),
            }
        }
        let remote = Remote::new(&args("http://127.0.0.1:9/", "c")).expect("valid");
        assert_eq!(remote.base(), "http://127.0.0.1:9");
    }

    #[test]
    fn envelope_codes_map_to_exit_codes() {
        let api = |code: &str| RemoteError::Api {
            code: code.to_owned(),
            message: "m".to_owned(),
        };
        assert_eq!(api("NOT_FOUND").exit(), exit::CONFIG);
        assert_eq!(api("INVALID_ARGUMENT").exit(), exit::CONFIG);
        assert_eq!(api("INTERNAL").exit(), exit::INTERNAL);
        assert_eq!(api("CONFLICT").exit(), exit::AGENT_FAILED);
        assert_eq!(api("SOMETHING_NEW").exit(), exit::INTERNAL);
        assert_eq!(
            envelope(&json!({"error": {"code": "NOT_FOUND", "message": "thread x not found"}})),
            Some(("NOT_FOUND".to_owned(), "thread x not found".to_owned()))
        );
        assert_eq!(envelope(&json!({"error": "flat"})), None);
        assert_eq!(envelope(&json!([1, 2])), None);
    }

    #[test]
    fn previews_are_one_short_line() {
        let long = "x\n".repeat(500);
        let line = preview(long.as_bytes());
        assert!(!line.contains('\n'));
        assert!(line.chars().count() <= 200);
        assert_eq!(preview(b"  "), "(empty body)");
    }
}
