// Unit tests of the SSE parser (run by web/test/run.mjs with node's test runner):
// the stream rules the UI relies on to resume after the last seq it saw.
import assert from "node:assert/strict";
import { test } from "node:test";
import { SseParser } from "../src/sse";

test("an event with id, kind and data is dispatched at the blank line", () => {
  const p = new SseParser();
  assert.deepEqual(p.feed('id: 7\nevent: message_delta\ndata: {"seq":7}\n'), []);
  assert.deepEqual(p.feed("\n"), [{ id: "7", event: "message_delta", data: '{"seq":7}' }]);
});

test("chunks may split anywhere, CRLF included", () => {
  const text = 'id: 1\r\nevent: turn_started\r\ndata: {"a":1}\r\n\r\nid: 2\r\ndata: x\r\n\r\n';
  for (let cut = 0; cut <= text.length; cut++) {
    const p = new SseParser();
    const got = [...p.feed(text.slice(0, cut)), ...p.feed(text.slice(cut))];
    assert.deepEqual(
      got,
      [
        { id: "1", event: "turn_started", data: '{"a":1}' },
        { id: "2", event: "message", data: "x" },
      ],
      `cut at ${cut}`,
    );
  }
});

test("lone CRs end lines too", () => {
  const p = new SseParser();
  assert.deepEqual(p.feed("data: a\rdata: b\r\r"), [{ event: "message", data: "a\nb" }]);
});

test("heartbeat comments and blank lines without data dispatch nothing", () => {
  const p = new SseParser();
  assert.deepEqual(p.feed(":heartbeat\n\n: another\n\nevent: x\n\n"), []);
  // The event name of an undispatched block does not leak into the next one.
  assert.deepEqual(p.feed("data: y\n\n"), [{ event: "message", data: "y" }]);
});

test("multi-line data joins with LF; a field without a colon is an empty value", () => {
  const p = new SseParser();
  assert.deepEqual(p.feed("data: one\ndata\ndata:  two\n\n"), [{ event: "message", data: "one\n\n two" }]);
});

test("the last id carries over to later events; an id with NUL is ignored", () => {
  const p = new SseParser();
  const got = p.feed("id: 3\ndata: a\n\ndata: b\n\nid: 4\0x\ndata: c\n\n");
  assert.deepEqual(
    got.map((m) => m.id),
    ["3", "3", "3"],
  );
});

test("an unterminated block is held, not dispatched", () => {
  const p = new SseParser();
  assert.deepEqual(p.feed("data: partial"), []);
  assert.deepEqual(p.feed(""), []);
  assert.deepEqual(p.feed("\n\n"), [{ event: "message", data: "partial" }]);
});
