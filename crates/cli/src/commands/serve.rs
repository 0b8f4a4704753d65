//! `agentplane serve`: the runtime as an HTTP service until SIGINT or SIGTERM.
//!
//! This file only turns flags and the configuration into the server's options, checks
//! the bind address before anything is opened, and owns the process's signals. What
//! the server does (routes, streams, graceful shutdown of turns) lives in
//! `agentplane-server`; how turns run lives in the runtime and the engine.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use agentplane_runtime::{Config, ModelStatus};
use agentplane_server::{
    A2aOptions, AllowedOrigins, ConnectionLimits, DEFAULT_HEARTBEAT, FollowerLimits,
    MODEL_PROBE_TIMEOUT, ServeOptions, StartupSummary, check_bind, probe_models, serve,
    startup_summary,
};
use clap::Args;

use crate::exit::{self, Exit};

#[derive(Args)]
pub struct ServeArgs {
    /// The address to listen on (default: `[server] listen`, else 127.0.0.1:8686).
    /// Anything but a loopback address needs --allow-public and a token.
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// The store: a SQLite file (a path, or `sqlite:PATH`; default: `[store] path`,
    /// else the user's data directory) or a PostgreSQL database several replicas share
    /// (`postgres://user@host/db`; prefer AGENTPLANE_DB, as arguments are visible to
    /// every user of the machine).
    #[arg(long, value_name = "PATH|URL")]
    db: Option<String>,
    /// The bearer token required on `/v1/*` (default: AGENTPLANE_AUTH_TOKEN, else
    /// `[server] auth_token`). Never needed: prefer the variable or the file, as
    /// arguments are visible to every user of the machine (a warning says so).
    #[arg(long, value_name = "TOKEN")]
    auth_token: Option<String>,
    /// Allow listening on a non-loopback address (an auth token is still required).
    #[arg(long)]
    allow_public: bool,
}

pub async fn run(config: Option<&Path>, args: ServeArgs) -> Exit {
    let mut config = match Config::load(config) {
        Ok(config) => config,
        Err(e) => return usage(&e.to_string()),
    };
    if let Some(listen) = args.listen {
        config.server.listen = listen.to_string();
    }
    if let Some(db) = args.db
        && let Err(e) = config.store.select(&db)
    {
        return usage(&format!("--db: {e}"));
    }
    if let Some(token) = args.auth_token {
        if token.trim().is_empty() {
            return usage("--auth-token must not be empty");
        }
        tracing::warn!(
            "--auth-token was given on the command line, which every user of this machine \
             can read (ps, /proc/<pid>/cmdline); set AGENTPLANE_AUTH_TOKEN or \
             `[server] auth_token` instead"
        );
        config.server.auth_token = Some(token);
    }
    config.server.allow_public |= args.allow_public;
    let listen: SocketAddr = match config.server.listen.parse() {
        Ok(listen) => listen,
        Err(_) => {
            return usage(&format!(
                "`server.listen` must be an address such as 127.0.0.1:8686, got {:?}",
                config.server.listen
            ));
        }
    };
    let allowed_origins = match AllowedOrigins::parse(&config.server.allowed_origins) {
        Ok(allowed) => allowed,
        Err(e) => return usage(&format!("`server.allowed_origins`: {e}")),
    };
    let mut options = ServeOptions {
        listen,
        auth_token: config.server.auth_token.clone(),
        allow_public: config.server.allow_public,
        shutdown_grace: config.server.shutdown_grace,
        heartbeat: DEFAULT_HEARTBEAT,
        metrics: None,
        executions: None,
        stop: None,
        connections: ConnectionLimits {
            header_read_timeout: config.server.limits.header_read_timeout,
            idle_timeout: config.server.limits.idle_timeout,
            max_connections: config.server.limits.max_connections,
            max_connections_per_address: config.server.limits.max_connections_per_address,
        },
        followers: FollowerLimits {
            max_total: config.server.limits.max_sse_followers,
            max_per_client: config.server.limits.max_sse_followers_per_client,
            max_per_address: config.server.limits.max_sse_followers_per_address,
        },
        allowed_origins,
        a2a: A2aOptions::default(),
    };
    fit_connections_to_open_files(&mut options.connections);
    // Refuse a public bind before the store is opened or a port is taken.
    if let Err(e) = check_bind(&options) {
        return usage(&e.to_string());
    }

    // Outside callers' workspaces: `[server] workspace_roots`, else on loopback the
    // directory serve started in (ADR 0031).
    let start_dir = std::env::current_dir().ok();
    let default_root = start_dir.as_deref().filter(|_| listen.ip().is_loopback());
    let runtime = match super::started_serving(config, default_root).await {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(listener) => listener,
        Err(e) => return usage(&format!("cannot listen on {listen}: {e}")),
    };
    runtime.listening_on(listener.local_addr().unwrap_or(listen));
    match runtime.workspace_root_count() {
        0 => tracing::warn!(
            "no workspace roots: callers may use any directory but the data and \
             configuration directories; set [server] workspace_roots"
        ),
        count => tracing::info!(roots = count, "workspaces confined to the workspace roots"),
    }
    options.metrics = Some(runtime.metrics().clone());
    let hub = runtime.hub().clone();
    options.a2a = match a2a_options(runtime.config(), &hub, start_dir.as_deref()) {
        Ok(a2a) => a2a,
        Err(message) => return usage(&message),
    };
    // Resumes turns whose approval was decided while no server ran, and expires
    // approvals nobody decides in time.
    hub.start_governance();
    // Recovers what a stopped process (or a dead replica) left running, per
    // `[executions] on_restart`, then starts the workers, webhook deliveries and the
    // watch for replicas that stop beating.
    if let Err(e) = runtime.start_services().await {
        eprintln!("error [{}]: executions could not start: {e}", e.code());
        return exit::INTERNAL;
    }
    options.executions = Some(runtime.executions().clone());
    // `[llm] ensure_available`: a local model server that does not answer is started
    // now, before the summary says whether agents are ready (ADR 0033).
    if let Err(e) = runtime.ensure_model_server().await {
        tracing::warn!(error = %e, "the model server could not be started");
    }
    let shutdown = runtime.shutdown_handle();
    options.stop = Some(Arc::new(move || {
        let shutdown = shutdown.clone();
        Box::pin(async move { shutdown.run().await })
    }));
    let agents = probe_models(&hub, runtime.agents(), MODEL_PROBE_TIMEOUT).await;
    eprint!(
        "{}",
        startup_summary(&StartupSummary {
            addr: listener.local_addr().unwrap_or(listen),
            db: &runtime.config().store.describe(),
            auth_required: options.auth_token.is_some(),
            agents: &agents,
            sandbox: &runtime
                .agents()
                .values()
                .filter(|a| a.ensembles.iter().any(|e| e == "shell"))
                .map(|a| (a.name.clone(), a.sandbox.in_force.clone()))
                .collect::<Vec<_>>(),
            setup_token: runtime.setup_token_file(),
        })
    );
    // No model server answers: the quick start's command that starts one where we look.
    let base_url = &runtime.config().llm.base_url;
    if let Some(command) = agents.iter().find_map(|agent| match &agent.status {
        ModelStatus::Unavailable { error, .. } => {
            crate::model_hint::local_model_command(base_url, error)
        }
        _ => None,
    }) {
        eprintln!("  Next    {}", crate::model_hint::describe(&command));
    }

    let grace = options.shutdown_grace;
    let stopping = {
        let hub = hub.clone();
        async move {
            stop_requested().await;
            eprintln!(
                "shutting down: {} running turn(s) get up to {}s to finish, then are \
                 cancelled; a second signal exits at once",
                hub.running_turns(),
                grace.as_secs()
            );
            tokio::spawn(async {
                stop_requested().await;
                eprintln!("second signal: exiting now; running turns will be marked interrupted");
                std::process::exit(exit::CANCELLED as i32);
            });
        }
    };
    let addr = listener.local_addr().unwrap_or(listen);
    let served = serve(runtime.services().clone(), listener, options, stopping).await;
    agentplane_runtime::server_address::withdraw(runtime.config(), addr);
    let code = super::finish(&runtime, served).await;
    if code == exit::SUCCESS {
        eprintln!("stopped");
    }
    code
}

/// `[a2a]` for the server: the published agents, and their tasks' workspace (the
/// directory `serve` started in unless set) checked against the workspace roots as
/// any outside caller's workspace is.
fn a2a_options(
    config: &Config,
    hub: &agentplane_engine::hub::Hub,
    start_dir: Option<&Path>,
) -> Result<A2aOptions, String> {
    let settings = &config.a2a;
    if !settings.enabled() {
        return Ok(A2aOptions::default());
    }
    let workspace = settings
        .workspace
        .clone()
        .or_else(|| start_dir.map(Path::to_path_buf))
        .ok_or("`a2a.workspace`: set it (the start directory could not be read)")?;
    let caller = agentplane_engine::identity::Caller::token(agentplane_server::A2A_DEFAULT_CLIENT);
    let workspace = hub
        .check_cwd(&caller, &workspace.display().to_string())
        .map_err(|e| format!("`a2a.workspace` ({}): {e}", workspace.display()))?;
    Ok(A2aOptions {
        agents: settings.agents.clone(),
        workspace,
        oidc_discovery: config.oidc.as_ref().map(|oidc| {
            format!(
                "{}/.well-known/openid-configuration",
                oidc.issuer.trim_end_matches('/')
            )
        }),
    })
}

/// File descriptors kept for everything but connections: the store, tool processes'
/// pipes, MCP servers, outgoing HTTP.
const FILES_FOR_THE_REST: usize = 512;

/// Raises the open-files limit to its hard maximum and lowers `max_connections` (with
/// a warning) where the limit could not hold them and the rest of the process.
fn fit_connections_to_open_files(limits: &mut ConnectionLimits) {
    let Some(files) = agentplane_runtime::environment::raise_open_files_limit() else {
        return;
    };
    let files = usize::try_from(files).unwrap_or(usize::MAX);
    let fit = files.saturating_sub(FILES_FOR_THE_REST).max(64);
    if limits.max_connections > fit {
        tracing::warn!(
            configured = limits.max_connections,
            lowered_to = fit,
            open_files_limit = files,
            "server.max_connections lowered to fit the open-files limit (ulimit -n)"
        );
        limits.max_connections = fit;
        limits.max_connections_per_address = limits.max_connections_per_address.min(fit);
    }
}

/// Reports a configuration or usage error.
fn usage(message: &str) -> Exit {
    eprintln!("error [INVALID_ARGUMENT]: {message}");
    exit::CONFIG
}

/// Resolves at the first SIGINT or SIGTERM.
pub(crate) async fn stop_requested() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    // Without SIGTERM handling, Ctrl-C still stops the server; if even that cannot be
    // listened for, never resolve rather than shut down at once.
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}
