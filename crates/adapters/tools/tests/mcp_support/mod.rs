//! Shared by the `mcp_*` tests: the real `@modelcontextprotocol/server-everything` over
//! stdio and streamable HTTP, a way to find every process a test started (by a marker
//! in its environment, which descendants inherit), and specs.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use agentplane_engine::ports::ToolContext;
use agentplane_tools::{McpServerSpec, McpTransport};
use tokio::io::AsyncBufReadExt;

/// The environment variable that marks a test's processes.
pub const MARK: &str = "MCP_TEST_MARK";

pub fn node() -> String {
    std::env::var("AGENTPLANE_TEST_NODE")
        .expect("AGENTPLANE_TEST_NODE is not set: run `eval \"$(scripts/test-peers.sh)\"` first")
}

pub fn peers() -> PathBuf {
    PathBuf::from(std::env::var("AGENTPLANE_TEST_NODE_PEERS").expect(
        "AGENTPLANE_TEST_NODE_PEERS is not set: run `eval \"$(scripts/test-peers.sh)\"` first",
    ))
}

pub fn everything_js() -> String {
    peers()
        .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
        .display()
        .to_string()
}

/// A marker no other test uses.
pub fn marker(test: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{test}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Live (not zombie) processes whose environment holds `MCP_TEST_MARK=<marker>`.
pub fn marked(marker: &str) -> Vec<u32> {
    let needle = format!("{MARK}={marker}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if !environ.split(|&b| b == 0).any(|v| v == needle.as_bytes()) {
            continue;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next().map(str::to_owned));
        if state.as_deref().is_some_and(|s| s != "Z") {
            found.push(pid);
        }
    }
    found
}

/// Waits up to `within` for the marked processes to be gone; returns what is left.
pub async fn gone_within(marker: &str, within: Duration) -> Vec<u32> {
    let deadline = Instant::now() + within;
    loop {
        let left = marked(marker);
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn kill9(pid: u32) {
    // SAFETY: kill(2) with plain integers.
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
}

pub fn ctx(timeout: Duration, output_cap: usize) -> ToolContext {
    ToolContext {
        workspace: std::env::temp_dir(),
        timeout,
        output_cap,
        scope: None,
    }
}

pub fn spec(name: &str, transport: McpTransport) -> McpServerSpec {
    McpServerSpec {
        name: name.into(),
        transport,
        startup_timeout: Duration::from_secs(20),
        call_timeout: None,
        idle_timeout: Duration::ZERO,
        tools: Default::default(),
        pin: Default::default(),
        screen: Default::default(),
    }
}

/// `command args…` over stdio, its processes marked with `marker`.
pub fn stdio(command: &str, args: &[&str], marker: &str) -> McpTransport {
    McpTransport::Stdio {
        command: command.into(),
        args: args.iter().map(|a| a.to_string()).collect(),
        env: BTreeMap::from([(MARK.to_string(), marker.to_string())]),
        cwd: None,
    }
}

/// server-everything over stdio.
pub fn everything_stdio(marker: &str) -> McpTransport {
    stdio(&node(), &[&everything_js(), "stdio"], marker)
}

/// server-everything over streamable HTTP, killed when dropped.
pub struct HttpEverything {
    child: tokio::process::Child,
    pub port: u16,
    pub marker: String,
}

impl HttpEverything {
    /// Starts it on `port` (0: any free port) and waits until it listens.
    pub async fn start(port: u16) -> Self {
        let marker = marker("http");
        let loopback = peers().join("loopback.mjs");
        let mut child = tokio::process::Command::new(node())
            .arg("--import")
            .arg(&loopback)
            .arg(everything_js())
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .env(MARK, &marker)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("node starts");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            let mut tx = Some(tx);
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(port) = line.strip_prefix("agentplane-peer-listening ")
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(port.trim().parse::<u16>().expect("a port"));
                }
            }
        });
        let port = tokio::time::timeout(Duration::from_secs(30), rx)
            .await
            .expect("server-everything listens within 30 s")
            .expect("the port line");
        Self {
            child,
            port,
            marker,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    pub fn transport(&self) -> McpTransport {
        McpTransport::Http {
            url: self.url(),
            headers: BTreeMap::from([("Authorization".into(), "Bearer s3cret-token".into())]),
            oauth: None,
        }
    }

    pub async fn kill(&mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

/// `crates/testkit/peers/mcp_upstream.py` (PyPI's `mcp` 2.3.0) over streamable HTTP,
/// killed when dropped: one protocol generation (`modern`, `legacy` or `both`), and
/// with `oauth` its own token endpoint issuing tokens of that many seconds.
pub struct Upstream {
    child: tokio::process::Child,
    pub base: String,
}

impl Upstream {
    pub async fn start(era: &str, oauth: Option<u64>) -> Self {
        let python = std::env::var("AGENTPLANE_TEST_PYTHON").expect(
            "AGENTPLANE_TEST_PYTHON is not set: run `eval \"$(scripts/test-peers.sh)\"` first",
        );
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testkit/peers/mcp_upstream.py");
        let mut command = tokio::process::Command::new(python);
        command.arg(script).args(["--era", era]);
        if let Some(lifetime) = oauth {
            command.args(["--oauth", &lifetime.to_string()]);
        }
        let mut child = command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("python starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the upstream listens within 30 s")
            .expect("read")
            .expect("a port line");
        let port: serde_json::Value = serde_json::from_str(&line).expect("JSON port line");
        let base = format!("http://127.0.0.1:{}", port["port"]);
        Self { child, base }
    }

    pub fn url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    pub fn transport(&self) -> McpTransport {
        McpTransport::Http {
            url: self.url(),
            headers: BTreeMap::new(),
            oauth: None,
        }
    }

    /// What the server recorded: tokens issued and refused, each request's version.
    pub async fn record(&self) -> serde_json::Value {
        reqwest::get(format!("{}/record", self.base))
            .await
            .expect("record")
            .json()
            .await
            .expect("record JSON")
    }

    /// The protocol-version headers of the MCP requests, distinct, in order seen.
    pub async fn versions(&self) -> Vec<String> {
        let mut seen = Vec::new();
        for request in self.record().await["requests"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            let version = request["header"].as_str().unwrap_or("none").to_owned();
            if !seen.contains(&version) {
                seen.push(version);
            }
        }
        seen
    }
}
