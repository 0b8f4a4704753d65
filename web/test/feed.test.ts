// Unit tests of ThreadFeed (run by web/test/run.mjs): the follow stream reopens after
// the last seq delivered, a turn's POST stream only continues the sequence, and a
// refusal that retrying cannot fix stops the feed. fetch() is replaced by a script of
// responses; the real parser and feed run.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ThreadFeed } from "../src/feed";
import type { AgentEvent } from "../src/types";

const store = new Map<string, string>();
(globalThis as any).localStorage = {
  getItem: (k: string) => store.get(k) ?? null,
  setItem: (k: string, v: string) => store.set(k, v),
  removeItem: (k: string) => store.delete(k),
};
(globalThis as any).sessionStorage = (globalThis as any).localStorage;

function sse(seqs: number[]): string {
  return seqs
    .map((seq) => `id: ${seq}\nevent: message_delta\ndata: ${JSON.stringify({ thread_id: "thr_1", turn_id: "turn_1", seq, ts: "", kind: "message_delta", text: `e${seq}` })}\n\n`)
    .join(":heartbeat\n\n");
}

function body(text: string): Response {
  return new Response(text, { status: 200, headers: { "content-type": "text/event-stream" } });
}

/** Replaces fetch with answers given in order; records the URLs asked for. */
function script(answers: (() => Response)[]): string[] {
  const urls: string[] = [];
  (globalThis as any).fetch = async (url: string) => {
    urls.push(url);
    const next = answers.shift();
    if (!next) return new Promise(() => {}); // then hang, like a quiet live stream
    return next();
  };
  return urls;
}

function until(condition: () => boolean): Promise<void> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const tick = () => {
      if (condition()) resolve();
      else if (Date.now() - started > 5000) reject(new Error("timed out"));
      else setTimeout(tick, 10);
    };
    tick();
  });
}

test("the follow stream reopens after the last seq it delivered", async () => {
  const urls = script([() => body(sse([1, 2])), () => { throw new TypeError("network down"); }, () => body(sse([2, 3]))]);
  const seen: number[] = [];
  const states: string[] = [];
  const feed = new ThreadFeed("thr_1", (e: AgentEvent) => seen.push(e.seq), (s) => states.push(s));
  feed.start();
  await until(() => seen.length === 3);
  feed.stop();
  assert.deepEqual(seen, [1, 2, 3], "each event once, in order");
  // The third answer replays 2 (already drawn, skipped) and brings 3.
  assert.deepEqual(
    urls.slice(0, 3).map((u) => u.split("?")[1]),
    ["after=0", "after=2", "after=2"],
  );
  assert.ok(states.includes("reconnecting"));
});

test("a turn's POST stream only continues the sequence", async () => {
  script([]);
  const seen: number[] = [];
  const feed = new ThreadFeed("thr_1", (e: AgentEvent) => seen.push(e.seq), () => {});
  feed.lastSeq = 1;
  await feed.readTurn(body(sse([2, 3])));
  await feed.readTurn(body(sse([5, 6]))); // a gap: the follow stream brings 4 first
  await feed.readTurn(body(sse([3]))); // a repeat
  assert.deepEqual(seen, [2, 3]);
  feed.stop();
});

test("a refusal retrying cannot fix stops the feed", async () => {
  const envelope = JSON.stringify({ error: { code: "UNAUTHORIZED", message: "a bearer token is required", details: {} } });
  const urls = script([() => new Response(envelope, { status: 401 })]);
  const states: string[] = [];
  let code = "";
  const feed = new ThreadFeed("thr_1", () => {}, (s, e) => {
    states.push(s);
    if (e) code = e.code;
  });
  feed.start();
  await until(() => states.includes("failed"));
  await new Promise((r) => setTimeout(r, 400)); // longer than the first retry pause
  assert.equal(urls.length, 1, "no retry");
  assert.equal(code, "UNAUTHORIZED");
  feed.stop();
});
