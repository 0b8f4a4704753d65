//! The HTTP API over real HTTP on 127.0.0.1: a runtime on a temp SQLite file, the
//! scripted model server, `agentplane_server::serve`, and reqwest as the client.

mod harness;

mod access_log;
mod acp;
mod acp_agents;
mod acp_opencode;
mod approvals;
mod auth;
mod costs;
mod executions;
mod gateway;
mod gateway_clients;
mod governance;
mod hostile;
mod mcp;
mod metrics;
mod openai_client;
mod openapi;
mod permissions;
mod policies;
mod providers;
mod shutdown;
mod threads;
mod turns;
mod ui;
mod versions;
