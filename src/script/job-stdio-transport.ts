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

/** Why the transport stopped the server itself, for the call that was waiting and any after it. */
export interface StdioStop {
  code: 'payload_too_large' | 'limit_reached';
  message: string;
}

/** Thrown by a JobStdio that may not go on (the script's request has no subrequest left): the transport stops the server with this reason. */
export class StdioStopError extends Error {
  readonly stop: StdioStop;
  constructor(stop: StdioStop) {
    super(stop.message);
    this.stop = stop;
  }
}

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
  #stop: StdioStop | undefined;

  constructor(job: JobStdio) {
    this.#job = job;
  }

  /** Set when the transport stopped the server (a line over STDIO_LINE_MAX_BYTES, no subrequest left); the SDK only says "Connection closed". */
  get stopped(): StdioStop | undefined {
    return this.#stop;
  }

  async start(): Promise<void> {
    void this.#pump();
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.#closed) throw new Error(this.#stop?.message ?? 'the server has stopped');
    let w: Awaited<ReturnType<JobStdio['write']>>;
    try {
      w = await this.#job.write(new TextEncoder().encode(`${JSON.stringify(message)}\n`));
    } catch (e) {
      if (e instanceof StdioStopError) await this.#stopWith(e.stop);
      throw e;
    }
    if (!w.ok) throw new Error(`could not write to the server's stdin: ${w.message}`);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#job.kill(this.#stop?.message ?? 'the script that started this MCP server ended').catch(() => undefined);
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
      if (e instanceof StdioStopError) return await this.#stopWith(e.stop);
      this.onerror?.(e instanceof Error ? e : new Error(String(e)));
      await this.close();
    }
  }

  /** Stops the server for `stop` (the first reason stands), telling the client why. */
  async #stopWith(stop: StdioStop): Promise<void> {
    this.#stop ??= stop;
    this.onerror?.(new Error(stop.message));
    await this.close();
  }

  /** Splits stdout into lines; each non-empty line is one JSON-RPC message (anything else is the server's noise, reported). */
  #take(text: string): void {
    // Only the new text can hold the next newline: a long line is not searched again on every page.
    const from = this.#pending.length;
    this.#pending += text;
    let nl = this.#pending.indexOf('\n', from);
    while (nl >= 0) {
      const line = this.#pending.slice(0, nl).replace(/\r$/, '');
      this.#pending = this.#pending.slice(nl + 1);
      if (overLineLimit(line)) {
        this.#stopServer();
        return;
      }
      if (line.trim() !== '') this.#deliver(line);
      nl = this.#pending.indexOf('\n');
    }
    if (overLineLimit(this.#pending)) this.#stopServer();
  }

  /** A line over the bound: the server is stopped rather than its line buffered without end. */
  #stopServer(): void {
    this.#pending = '';
    this.#stop = {
      code: 'payload_too_large',
      message: `the server wrote a line longer than ${STDIO_LINE_MAX_BYTES} bytes (4 MiB, the stdio transport's limit of one JSON-RPC message); it was stopped`,
    };
    this.onerror?.(new Error(this.#stop.message));
    void this.close();
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

/** Whether `s` is over STDIO_LINE_MAX_BYTES as UTF-8 (counted only when its length alone does not decide). */
function overLineLimit(s: string): boolean {
  if (s.length > STDIO_LINE_MAX_BYTES) return true;
  if (s.length * 3 <= STDIO_LINE_MAX_BYTES) return false;
  return new TextEncoder().encode(s).byteLength > STDIO_LINE_MAX_BYTES;
}
