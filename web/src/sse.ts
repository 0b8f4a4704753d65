// Server-Sent Events read from a fetch() body. EventSource cannot send headers (the
// token, the client id) nor POST, so the UI reads streams itself. The parser follows
// the WHATWG event-stream rules: lines end in LF, CRLF or CR; `:` starts a comment
// (the server's heartbeats); `data` lines join with LF; an empty line dispatches.

/** One dispatched event. */
export interface SseMessage {
  id?: string;
  event: string;
  data: string;
}

/** An incremental parser: feed it text as it arrives, get whole events back. */
export class SseParser {
  private buffer = "";
  private data: string[] = [];
  private event = "";
  private id: string | undefined;
  private sawCr = false;

  /** Parses a chunk; returns the events it completed. */
  feed(chunk: string): SseMessage[] {
    const out: SseMessage[] = [];
    let text = chunk;
    // A CR at the end of the previous chunk may be the first half of CRLF.
    if (this.sawCr && text.startsWith("\n")) text = text.slice(1);
    this.sawCr = false;
    this.buffer += text;
    for (;;) {
      const match = /\r\n|\r|\n/.exec(this.buffer);
      if (!match) break;
      if (match[0] === "\r" && match.index === this.buffer.length - 1) {
        this.sawCr = true;
      }
      const line = this.buffer.slice(0, match.index);
      this.buffer = this.buffer.slice(match.index + match[0].length);
      const message = this.line(line);
      if (message) out.push(message);
    }
    return out;
  }

  private line(line: string): SseMessage | null {
    if (line === "") {
      if (this.data.length === 0) {
        this.event = "";
        return null;
      }
      const message: SseMessage = { event: this.event || "message", data: this.data.join("\n") };
      if (this.id !== undefined) message.id = this.id;
      this.data = [];
      this.event = "";
      return message;
    }
    if (line.startsWith(":")) return null;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") this.data.push(value);
    else if (field === "event") this.event = value;
    else if (field === "id" && !value.includes("\0")) this.id = value;
    return null;
  }
}

/** The events of a streaming response body, until it ends or `signal` aborts. */
export async function* readSse(body: ReadableStream<Uint8Array>, signal?: AbortSignal): AsyncGenerator<SseMessage> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const parser = new SseParser();
  try {
    for (;;) {
      if (signal?.aborted) return;
      const { value, done } = await reader.read();
      if (done) return;
      for (const message of parser.feed(decoder.decode(value, { stream: true }))) yield message;
    }
  } finally {
    reader.releaseLock();
  }
}
