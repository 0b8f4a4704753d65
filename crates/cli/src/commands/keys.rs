//! `agentplane keys`: API keys in the configured store (ADR 0030) — create one for a
//! client and its roles, list them (never a secret), revoke one.
//!
//! It goes through the runtime, the one composition root, and the hub's key methods as
//! the local caller, so the rules are the same as `/v1/keys`'s; on PostgreSQL this
//! works beside running replicas. A SQLite file held by a running `serve` (or a
//! `--key`) makes it a client of that server's `/v1/keys` instead (`remote.rs`):
//! with the key, else `AGENTPLANE_AUTH_TOKEN`, and for `create` the one-time setup
//! token `serve` wrote to the data directory (a server without keys or token). `create`
//! prints the secret once, as its last line; it is stored nowhere.

use std::path::Path;

use agentplane_core::KeyId;
use agentplane_core::identity::parse_lifetime;
use agentplane_engine::hub::HubError;
use agentplane_engine::ports::KeyRecord;
use agentplane_engine::services::identity::CreateKey;
use agentplane_runtime::{Config, Runtime, RuntimeError, replicas, setup_token};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::remote::{Remote, RemoteError, ServerArgs};
use crate::exit::{self, Exit};

/// The client recorded as the creator of keys made with this command.
const CLI_CLIENT: &str = "cli";

#[derive(Args)]
pub struct KeysArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Create a key; its secret is printed once, as the last line.
    Create(CreateArgs),
    /// List every key (never a secret).
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Revoke a key: refused from the next request on, on every replica.
    Revoke {
        /// The key's id (`key_…`).
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}

impl Action {
    /// Where a running server is, used when it holds the store or a key is given.
    fn server(&self) -> &ServerArgs {
        match self {
            Self::Create(args) => &args.server,
            Self::List { server, .. } | Self::Revoke { server, .. } => server,
        }
    }
}

#[derive(Args)]
struct CreateArgs {
    /// The client the key acts as.
    #[arg(long, value_name = "NAME")]
    client: String,
    /// A role: admin, operator, approver, viewer, or another name policies address as
    /// `role:NAME`. Repeat for several.
    #[arg(long = "role", value_name = "ROLE", required = true)]
    roles: Vec<String>,
    /// Lifetime: a number and s, m, h or d (`90d`). Default: never expires.
    #[arg(long, value_name = "DURATION")]
    expires: Option<String>,
    /// What the key is for.
    #[arg(long, value_name = "TEXT")]
    description: Option<String>,
    /// The server to ask when it holds the store (or with --key).
    #[command(flatten)]
    server: ServerArgs,
}

pub async fn run(config: Option<&Path>, args: KeysArgs) -> Exit {
    let config = match Config::load(config) {
        Ok(config) => config,
        Err(e) => return super::failed_to_start(&RuntimeError::from(e)),
    };
    if args.action.server().has_key() || replicas::held_by_a_server(&config.store) {
        return match over_api(&config, args.action).await {
            Ok(()) => exit::SUCCESS,
            Err(e) => e.report(),
        };
    }
    let runtime = match Runtime::start(config).await {
        Ok(runtime) => runtime,
        Err(e) => return super::failed_to_start(&e),
    };
    let result = act(&runtime, args.action).await;
    runtime.shutdown().await;
    match result {
        Ok(()) => exit::SUCCESS,
        Err(e) => {
            eprintln!("error [{}]: {e}", e.code().as_str());
            exit::of_code(e.code())
        }
    }
}

async fn act(runtime: &Runtime, action: Action) -> Result<(), HubError> {
    let hub = runtime.hub();
    match action {
        Action::Create(args) => {
            let expires_in_secs = args
                .expires
                .as_deref()
                .map(parse_lifetime)
                .transpose()
                .map_err(HubError::InvalidArgument)?;
            let (record, secret) = hub
                .identity()
                .create_key(
                    CLI_CLIENT,
                    CreateKey {
                        client: args.client,
                        roles: args.roles,
                        expires_in_secs,
                        description: args.description,
                        setup_token: None,
                    },
                )
                .await?;
            println!("created {}", describe(&record));
            println!("the key is shown this once; keep it now:");
            println!("{}", secret.expose());
        }
        Action::List { json, .. } => print_list(&hub.identity().list_keys(CLI_CLIENT).await?, json),
        Action::Revoke { id, .. } => {
            let id = KeyId::parse(&id).map_err(HubError::InvalidArgument)?;
            let record = hub.identity().revoke_key(CLI_CLIENT, &id).await?;
            println!("revoked {}", describe(&record));
        }
    }
    Ok(())
}

/// The same actions as a client of the running server that holds the store: its
/// `/v1/keys`, with the key or token given, and for `create` without a key the setup
/// token from the data directory's file when `serve` wrote one.
async fn over_api(config: &Config, action: Action) -> Result<(), RemoteError> {
    let server = action.server().clone().located(config);
    let mut remote = Remote::new(&server)?;
    if !server.has_key() {
        eprintln!(
            "the store is held by a running server: asking it at {}",
            remote.base()
        );
    }
    match action {
        Action::Create(args) => {
            if !args.server.has_key() {
                match setup_token::read(config) {
                    Ok(Some(token)) => remote = remote.with_setup_token(token)?,
                    Ok(None) => {}
                    Err(why) => eprintln!("warning: {why}; sending no setup token"),
                }
            }
            let body = json!({
                "client": args.client,
                "roles": args.roles,
                "expires": args.expires,
                "description": args.description,
            });
            let created = remote.post("/v1/keys", &body).await?;
            let record = record_of(&created["key"], remote.base())?;
            let secret = created["secret"]
                .as_str()
                .filter(|s| agentplane_core::identity::looks_like_key(s))
                .ok_or_else(|| unexpected(remote.base(), "no key secret in the answer"))?;
            println!("created {}", describe(&record));
            println!("the key is shown this once; keep it now:");
            println!("{secret}");
        }
        Action::List { json, .. } => {
            let listed = remote.get("/v1/keys", &[]).await?;
            let keys = listed["keys"]
                .as_array()
                .ok_or_else(|| unexpected(remote.base(), "no list of keys in the answer"))?
                .iter()
                .map(|key| record_of(key, remote.base()))
                .collect::<Result<Vec<_>, _>>()?;
            print_list(&keys, json);
        }
        Action::Revoke { id, .. } => {
            let id = KeyId::parse(&id).map_err(RemoteError::Usage)?;
            let revoked = remote
                .post(&format!("/v1/keys/{id}/revoke"), &json!({}))
                .await?;
            println!("revoked {}", describe(&record_of(&revoked, remote.base())?));
        }
    }
    Ok(())
}

/// A key as `/v1/keys` shows it, read back into the record the local commands print.
fn record_of(key: &Value, base: &str) -> Result<KeyRecord, RemoteError> {
    let text = |field: &str| key[field].as_str().map(str::to_owned);
    let id = text("id")
        .and_then(|id| KeyId::parse(&id).ok())
        .ok_or_else(|| unexpected(base, "a key without a valid id"))?;
    Ok(KeyRecord {
        id,
        client: text("client").unwrap_or_default(),
        roles: key["roles"]
            .as_array()
            .map(|roles| {
                roles
                    .iter()
                    .filter_map(|r| r.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        description: text("description"),
        created_by: text("created_by").unwrap_or_default(),
        created_at: text("created_at").unwrap_or_default(),
        expires_at: text("expires_at"),
        revoked_at: text("revoked_at"),
    })
}

fn unexpected(base: &str, detail: &str) -> RemoteError {
    RemoteError::Unexpected {
        url: format!("{base}/v1/keys"),
        detail: detail.to_owned(),
    }
}

/// `keys list`'s output: a table, or JSON with `--json`.
fn print_list(keys: &[KeyRecord], json: bool) {
    if json {
        let list: Vec<_> = keys.iter().map(as_json).collect();
        println!("{}", Value::Array(list));
    } else if keys.is_empty() {
        eprintln!("no keys");
    } else {
        for key in keys {
            println!("{}", describe(key));
        }
    }
}

/// One line: id, client, roles, state.
fn describe(key: &KeyRecord) -> String {
    let state = match (&key.revoked_at, &key.expires_at) {
        (Some(at), _) => format!("revoked {at}"),
        (None, Some(at)) => format!("expires {at}"),
        (None, None) => "never expires".to_owned(),
    };
    format!(
        "{}  client={}  roles={}  {state}",
        key.id,
        key.client,
        key.roles.join(",")
    )
}

fn as_json(key: &KeyRecord) -> serde_json::Value {
    json!({
        "id": key.id.to_string(),
        "client": key.client,
        "roles": key.roles,
        "description": key.description,
        "created_by": key.created_by,
        "created_at": key.created_at,
        "expires_at": key.expires_at,
        "revoked_at": key.revoked_at,
    })
}
