// A thread's events, in order, exactly once, across disconnects.
//
// The follow stream (`GET /v1/threads/{id}/events?after=SEQ`) replays what is stored
// and then follows; when it breaks (network, server restart) it is reopened after the
// last seq delivered, with a growing pause, so nothing is lost and nothing repeats.
// A turn's own POST stream carries the same events sooner; they are taken only when
// they continue the sequence exactly (seq = last + 1), otherwise the follow stream
// delivers them in order. Views see one ordered feed whatever stream an event came by.

import { ApiError, seg, stream } from "./api";
import { readSse } from "./sse";
import type { AgentEvent } from "./types";

/** Where the follow stream stands. */
export type FeedState = "connecting" | "live" | "reconnecting" | "failed";

const FIRST_PAUSE_MS = 250;
const MAX_PAUSE_MS = 4000;

export class ThreadFeed {
  /** The last seq handed to the view (0: none yet). */
  lastSeq = 0;
  private readonly abort = new AbortController();

  constructor(
    private readonly threadId: string,
    private readonly onEvent: (event: AgentEvent) => void,
    private readonly onState: (state: FeedState, error?: ApiError) => void,
  ) {}

  /** Starts following; runs until `stop`. */
  start(): void {
    void this.follow();
  }

  /** Stops every stream of this feed. */
  stop(): void {
    this.abort.abort();
  }

  /**
   * Reads a turn's POST stream into the feed; resolves when the turn's stream ends.
   * The stream is read to its end even after `stop` (the view was left): the server
   * declines a turn's pending permissions when its client goes away, and leaving a
   * view is not going away. Only closing the page is.
   */
  async readTurn(response: Response): Promise<void> {
    if (!response.body) return;
    try {
      for await (const message of readSse(response.body)) {
        if (this.abort.signal.aborted) continue;
        const event = parse(message.data, message.event);
        if (event && event.seq === this.lastSeq + 1) this.deliver(event);
      }
    } catch {
      // The follow stream has the same events; a broken POST stream loses nothing.
    }
  }

  /** Whether `stop` was called. */
  get stopped(): boolean {
    return this.abort.signal.aborted;
  }

  private deliver(event: AgentEvent): void {
    this.lastSeq = event.seq;
    this.onEvent(event);
  }

  private async follow(): Promise<void> {
    let pause = FIRST_PAUSE_MS;
    this.onState("connecting");
    while (!this.abort.signal.aborted) {
      try {
        const response = await stream(
          "GET",
          `/v1/threads/${seg(this.threadId)}/events?after=${this.lastSeq}`,
          undefined,
          this.abort.signal,
        );
        this.onState("live");
        pause = FIRST_PAUSE_MS;
        for await (const message of readSse(response.body!, this.abort.signal)) {
          if (message.event === "error") {
            // The stream failed on the server (its data is the envelope): reconnect.
            break;
          }
          const event = parse(message.data, message.event);
          if (event && event.seq > this.lastSeq) this.deliver(event);
        }
      } catch (e) {
        if (this.abort.signal.aborted) return;
        if (e instanceof ApiError && !e.transient) {
          // A wrong token, an unknown thread: retrying will not help.
          this.onState("failed", e);
          return;
        }
      }
      if (this.abort.signal.aborted) return;
      this.onState("reconnecting");
      await sleep(pause, this.abort.signal);
      pause = Math.min(pause * 2, MAX_PAUSE_MS);
    }
  }
}

function parse(data: string, kind: string): AgentEvent | null {
  try {
    const event = JSON.parse(data);
    if (event && typeof event.seq === "number" && typeof event.kind === "string") return event;
  } catch {
    // Not an event (a heartbeat never reaches here; anything else is skipped).
  }
  console.warn("skipped a stream message that is not an event", kind);
  return null;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}
