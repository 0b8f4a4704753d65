#!/usr/bin/env bash
# Installs the real protocol peers the tests talk to, and prints the environment that
# points the tests at them (`eval "$(scripts/test-peers.sh)"`; scripts/test.sh does it):
#
#   AGENTPLANE_TEST_NODE            node, to run the npm peers
#   AGENTPLANE_TEST_NODE_PEERS      crates/testkit/peers (node_modules inside, loopback.mjs)
#   AGENTPLANE_TEST_PYTHON          a venv's python with PyPI's `mcp` (its client),
#                                   `openai` (the official client, for the gateway),
#                                   `anthropic` and `openai-agents` (more gateway clients),
#                                   `PyJWT` with `cryptography` (tokens for the OIDC tests),
#                                   `opentelemetry-proto` (the OTLP receiver) and `a2a-sdk`
#                                   (the official A2A client and server classes, protocol 1.0)
#   AGENTPLANE_TEST_PYTHON_A2A03    a second venv's python with `a2a-sdk` 0.3 (an A2A
#                                   client and server of the protocol's 0.3 generation)
#   AGENTPLANE_TEST_OPENCODE        opencode (npm `opencode-ai`, pinned; its binary comes
#                                   from the optional dependency `opencode-linux-x64`)
#   AGENTPLANE_TEST_CLAUDE_CODE     Claude Code (npm `@anthropic-ai/claude-code`, pinned),
#                                   a client of the gateway's Messages API
#   AGENTPLANE_TEST_CODEX           Codex CLI (npm `@openai/codex`, pinned), a client of
#                                   the gateway's Responses API
#   AGENTPLANE_TEST_MCP_INSPECTOR   the MCP Inspector (npm `@modelcontextprotocol/inspector`,
#                                   pinned), whose CLI is a client of the MCP gateway
#
# npm packages come from crates/testkit/peers/package-lock.json (`npm ci`); the Python
# venv lives in .local-model/peers (gitignored). Both are reused when already current.
set -euo pipefail
cd "$(dirname "$0")/.."

mcp_version="2.3.0"
opencode_version="1.18.33"
claude_code_version="2.1.328"
codex_version="0.171.0"
inspector_version="2.12.0"
openai_version="3.54.0"
# More gateway clients: Anthropic's SDK (the Messages API) and the OpenAI Agents SDK
# (the Responses API, its default).
anthropic_version="2.10.0"
openai_agents_version="0.24.0"
pyjwt_version="2.15.1"
cryptography_version="50.0.2"
# The OpenTelemetry protobuf definitions, for the OTLP receiver of the trace tests.
otel_proto_version="1.45.2"
# The official A2A SDK: 1.x speaks protocol 1.0; 0.3.x, in a venv of its own, speaks 0.3.
a2a_version="1.3.0"
a2a03_version="0.3.26"
peers="$PWD/crates/testkit/peers"
venv="${AGENTPLANE_PEERS_VENV:-$PWD/.local-model/peers}"
venv03="${AGENTPLANE_PEERS_VENV_A2A03:-$PWD/.local-model/peers-a2a03}"
opencode_dir="${AGENTPLANE_OPENCODE_DIR:-$PWD/.local-model/opencode}"
claude_code_dir="${AGENTPLANE_CLAUDE_CODE_DIR:-$PWD/.local-model/claude-code}"
codex_dir="${AGENTPLANE_CODEX_DIR:-$PWD/.local-model/codex}"
inspector_dir="${AGENTPLANE_INSPECTOR_DIR:-$PWD/.local-model/inspector}"

node="$(command -v node || true)"
if [[ -z "$node" ]] || ! command -v npm >/dev/null; then
  echo "test-peers: node and npm are needed (scripts/install-deps.sh installs them)" >&2
  exit 1
fi

# npm ci only when the lock changed since the last install.
stamp="$peers/node_modules/.agentplane-lock"
if ! cmp -s "$peers/package-lock.json" "$stamp" 2>/dev/null; then
  echo "test-peers: npm ci in $peers" >&2
  (cd "$peers" && npm ci --no-audit --no-fund --loglevel=error >&2)
  cp "$peers/package-lock.json" "$stamp"
fi

if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '$mcp_version' or m.version('openai') != '$openai_version' or m.version('PyJWT') != '$pyjwt_version' or m.version('cryptography') != '$cryptography_version' or m.version('opentelemetry-proto') != '$otel_proto_version' or m.version('a2a-sdk') != '$a2a_version' or m.version('anthropic') != '$anthropic_version' or m.version('openai-agents') != '$openai_agents_version')" 2>/dev/null; then
  echo "test-peers: installing mcp $mcp_version, openai $openai_version, anthropic $anthropic_version, openai-agents $openai_agents_version, PyJWT $pyjwt_version, opentelemetry-proto $otel_proto_version, a2a-sdk $a2a_version into $venv" >&2
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "mcp==$mcp_version" "openai==$openai_version" \
    "anthropic==$anthropic_version" "openai-agents==$openai_agents_version" \
    "PyJWT==$pyjwt_version" "cryptography==$cryptography_version" \
    "opentelemetry-proto==$otel_proto_version" "a2a-sdk[http-server]==$a2a_version" >&2
fi
if ! "$venv03/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('a2a-sdk') != '$a2a03_version')" 2>/dev/null; then
  echo "test-peers: installing a2a-sdk $a2a03_version into $venv03" >&2
  mkdir -p "$(dirname "$venv03")"
  python3 -m venv "$venv03"
  "$venv03/bin/python" -m pip install --quiet --disable-pip-version-check \
    "a2a-sdk[http-server]==$a2a03_version" >&2
fi

# opencode from npm into a cache of its own, reinstalled only when the pin changes.
opencode="$opencode_dir/node_modules/.bin/opencode"
if [[ "$("$opencode" --version 2>/dev/null)" != "$opencode_version" ]]; then
  echo "test-peers: installing opencode-ai $opencode_version into $opencode_dir" >&2
  mkdir -p "$opencode_dir"
  (cd "$opencode_dir" && npm install --no-audit --no-fund --loglevel=error --prefix . \
    "opencode-ai@$opencode_version" >&2)
fi

# Claude Code the same way (its binary comes from `@anthropic-ai/claude-code-linux-x64`).
claude_code="$claude_code_dir/node_modules/.bin/claude"
if [[ "$("$claude_code" --version 2>/dev/null)" != "$claude_code_version (Claude Code)" ]]; then
  echo "test-peers: installing @anthropic-ai/claude-code $claude_code_version into $claude_code_dir" >&2
  mkdir -p "$claude_code_dir"
  (cd "$claude_code_dir" && npm install --no-audit --no-fund --loglevel=error --prefix . \
    "@anthropic-ai/claude-code@$claude_code_version" >&2)
fi

# Codex CLI the same way (its binary comes from a platform package of `@openai/codex`).
codex="$codex_dir/node_modules/.bin/codex"
if [[ "$("$codex" --version 2>/dev/null)" != "codex-cli $codex_version" ]]; then
  echo "test-peers: installing @openai/codex $codex_version into $codex_dir" >&2
  mkdir -p "$codex_dir"
  (cd "$codex_dir" && npm install --no-audit --no-fund --loglevel=error --prefix . \
    "@openai/codex@$codex_version" >&2)
fi

# The MCP Inspector the same way.
inspector="$inspector_dir/node_modules/.bin/mcp-inspector"
if [[ "$("$inspector" --version 2>/dev/null)" != *"$inspector_version"* ]]; then
  echo "test-peers: installing @modelcontextprotocol/inspector $inspector_version into $inspector_dir" >&2
  mkdir -p "$inspector_dir"
  (cd "$inspector_dir" && npm install --no-audit --no-fund --loglevel=error --prefix . \
    "@modelcontextprotocol/inspector@$inspector_version" >&2)
fi

echo "export AGENTPLANE_TEST_NODE='$node'"
echo "export AGENTPLANE_TEST_NODE_PEERS='$peers'"
echo "export AGENTPLANE_TEST_PYTHON='$venv/bin/python'"
echo "export AGENTPLANE_TEST_PYTHON_A2A03='$venv03/bin/python'"
echo "export AGENTPLANE_TEST_OPENCODE='$opencode'"
echo "export AGENTPLANE_TEST_CLAUDE_CODE='$claude_code'"
echo "export AGENTPLANE_TEST_CODEX='$codex'"
echo "export AGENTPLANE_TEST_MCP_INSPECTOR='$inspector'"
