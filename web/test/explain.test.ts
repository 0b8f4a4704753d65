// Unit tests of the explain form's checks (run by web/test/run.mjs with node's test
// runner): what is sent to `POST /v1/policies/explain`, and what is refused unsent.
import assert from "node:assert/strict";
import { test } from "node:test";
import { explainRequest, type ExplainFields } from "../src/explain";

const blank: ExplainFields = { agent: "", tool: "", args: "", client: "", roles: "", at: "" };

test("only the agent: a turn-level request", () => {
  assert.deepEqual(explainRequest({ ...blank, agent: " engineering " }), { ok: true, body: { agent: "engineering" } });
});

test("every field, trimmed; roles split on commas", () => {
  const got = explainRequest({
    agent: "engineering",
    tool: " write_file ",
    args: ' {"path": ".github/x.yml"} ',
    client: " ci-bot ",
    roles: "operator, ,admin ,",
    at: "2025-03-01T09:30:00Z",
  });
  assert.deepEqual(got, {
    ok: true,
    body: {
      agent: "engineering",
      tool: "write_file",
      args: { path: ".github/x.yml" },
      client: "ci-bot",
      roles: ["operator", "admin"],
      at: "2025-03-01T09:30:00.000Z",
    },
  });
});

test("a local time becomes an RFC 3339 instant", () => {
  const got = explainRequest({ ...blank, agent: "a", at: "2025-03-01T09:30" });
  assert.ok(got.ok);
  assert.equal(got.body.at, new Date(2025, 2, 1, 9, 30).toISOString());
});

test("arguments that are not JSON are refused with a message", () => {
  const got = explainRequest({ ...blank, agent: "a", tool: "write_file", args: "{path: x}" });
  assert.equal(got.ok, false);
  assert.ok(!got.ok && got.field === "args" && /not JSON/.test(got.message));
});

test("arguments must be an object", () => {
  for (const args of ["[1]", "3", '"x"', "null"]) {
    const got = explainRequest({ ...blank, agent: "a", tool: "t", args });
    assert.ok(!got.ok && got.field === "args" && /JSON object/.test(got.message), args);
  }
});

test("arguments without a tool are refused", () => {
  const got = explainRequest({ ...blank, agent: "a", args: "{}" });
  assert.ok(!got.ok && got.field === "args" && /tool/.test(got.message));
});

test("no agent, or a nonsense instant, is refused", () => {
  assert.ok(!explainRequest(blank).ok);
  const got = explainRequest({ ...blank, agent: "a", at: "soon" });
  assert.ok(!got.ok && got.field === "at");
});
