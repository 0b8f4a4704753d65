//! `agentplane keys`: API keys in the configured store (ADR 0030) — create one for a
//! client and its roles, list them (never a secret), revoke one.
//!
//! It goes through the runtime, the one composition root, and the hub's key methods as
//! the local caller, so the rules are the same as `/v1/keys`'s. A SQLite file is locked
//! by a running `serve`: stop it, or use `POST /v1/keys` with an admin credential; on
//! PostgreSQL this works beside running replicas. `create` prints the secret once, as
//! its last line; it is stored nowhere.

use std::path::Path;

use agentplane_core::KeyId;
use agentplane_core::identity::parse_lifetime;
use agentplane_engine::hub::{CreateKey, HubError};
use agentplane_engine::ports::KeyRecord;
use agentplane_runtime::Runtime;
use clap::{Args, Subcommand};
use serde_json::json;

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
    },
    /// Revoke a key: refused from the next request on, on every replica.
    Revoke {
        /// The key's id (`key_…`).
        id: String,
    },
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
}

pub async fn run(config: Option<&Path>, args: KeysArgs) -> Exit {
    let runtime = match super::start(config).await {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error [{}]: {e}", e.code());
            return exit::of_error(&e);
        }
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
                .create_key(
                    CLI_CLIENT,
                    CreateKey {
                        client: args.client,
                        roles: args.roles,
                        expires_in_secs,
                        description: args.description,
                    },
                )
                .await?;
            println!("created {}", describe(&record));
            println!("the key is shown this once; keep it now:");
            println!("{}", secret.expose());
        }
        Action::List { json } => {
            let keys = hub.list_keys(CLI_CLIENT).await?;
            if json {
                let list: Vec<_> = keys.iter().map(as_json).collect();
                println!("{}", serde_json::Value::Array(list));
            } else if keys.is_empty() {
                eprintln!("no keys");
            } else {
                for key in &keys {
                    println!("{}", describe(key));
                }
            }
        }
        Action::Revoke { id } => {
            let id = KeyId::parse(&id).map_err(HubError::InvalidArgument)?;
            let record = hub.revoke_key(CLI_CLIENT, &id).await?;
            println!("revoked {}", describe(&record));
        }
    }
    Ok(())
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
