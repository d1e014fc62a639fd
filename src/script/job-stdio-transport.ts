/**
 * The MCP stdio transport (newline-delimited JSON-RPC on stdin/stdout) over a running interactive job: messages
 * go to the job's stdin through the team's object (writeJobStdin), and the job's stdout is read as a stream
 * (waitJobOutput for new bytes, readJobOutput from the last offset). The official MCP client drives it, so
 * initialize → notifications/initialized → tools/list / tools/call follow the SDK exactly.
 */
import { deserializeMessage, type JSONRPCMessage, type Transport } from '@modelcontextprotocol/client';

/**
 * Longest line (one JSON-RPC message) a server may write. A server flooding stdout without a newline is cut off here
 * rather than buffered without end; the job's own output is bounded by the policy like any job's (limits.artifactBytes).
 */
export const STDIO_LINE_MAX_BYTES = 4 * 1024 * 1024;
/** One wait for new output; the team's object caps it at OUTPUT_WAIT_MAX_MS anyway. */
const READ_WAIT_MS = 25_000;
/** Most bytes read from stdout in one page. */
const READ_PAGE_BYTES = 256 * 1024;

/** What the transport needs of the job: the edge's interactive-job calls, bound to one job. */
export interface JobStdio {
  write(data: Uint8Array): Promise<{ ok: true } | { ok: false; message: string }>;
  /** Waits for stdout past `offset`; `ended`: the job has ended (what it wrote is still readable). */
  wait(offset: number, waitMs: number): Promise<{ ended: boolean }>;
  /** Stdout from `offset`; `done`: nothing more will ever come. */
  read(offset: number, max: number): Promise<{ data: Uint8Array; nextOffset: number; done: boolean }>;
  /** Stops the job. */
  kill(reason: string): Promise<void>;
}

export class JobStdioTransport implements Transport {
  onmessage?: (message: JSONRPCMessage) => void;
  onclose?: () => void;
  onerror?: (error: Error) => void;
  readonly #job: JobStdio;
  readonly #decoder = new TextDecoder();
  #pending = '';
  #offset = 0;
  #closed = false;

  constructor(job: JobStdio) {
    this.#job = job;
  }

  async start(): Promise<void> {
    void this.#pump();
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.#closed) throw new Error('the server has stopped');
    const w = await this.#job.write(new TextEncoder().encode(`${JSON.stringify(message)}\n`));
    if (!w.ok) throw new Error(`could not write to the server's stdin: ${w.message}`);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#job.kill('the script that started this MCP server ended').catch(() => undefined);
    this.onclose?.();
  }

  async #pump(): Promise<void> {
    try {
      while (!this.#closed) {
        const { ended } = await this.#job.wait(this.#offset, READ_WAIT_MS);
        if (this.#closed) return;
        const page = await this.#job.read(this.#offset, READ_PAGE_BYTES);
        this.#offset = page.nextOffset;
        this.#take(this.#decoder.decode(page.data, { stream: !page.done }));
        if (page.done || (ended && page.data.byteLength === 0)) {
          await this.close();
          return;
        }
      }
    } catch (e) {
      this.onerror?.(e instanceof Error ? e : new Error(String(e)));
      await this.close();
    }
  }

  /** Splits stdout into lines; each non-empty line is one JSON-RPC message (anything else is the server's noise, reported). */
  #take(text: string): void {
    this.#pending += text;
    let nl = this.#pending.indexOf('\n');
    while (nl >= 0) {
      const line = this.#pending.slice(0, nl).replace(/\r$/, '');
      this.#pending = this.#pending.slice(nl + 1);
      if (line.trim() !== '') this.#deliver(line);
      nl = this.#pending.indexOf('\n');
    }
    if (this.#pending.length > STDIO_LINE_MAX_BYTES) {
      this.#pending = '';
      this.onerror?.(new Error(`the server wrote a line longer than ${STDIO_LINE_MAX_BYTES} bytes without a newline; stopped`));
      void this.close();
    }
  }

  #deliver(line: string): void {
    let msg: JSONRPCMessage;
    try {
      msg = deserializeMessage(line);
    } catch {
      this.onerror?.(new Error(`the server wrote a line on stdout that is not a JSON-RPC message: ${line.slice(0, 200)}`));
      return;
    }
    this.onmessage?.(msg);
  }
}
