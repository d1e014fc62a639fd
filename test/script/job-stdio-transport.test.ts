/**
 * The stdio transport over a job's stdin/stdout, with the official MCP client and a job played in memory: lines in,
 * lines out, a server's noise reported, a line over 4 MiB (with or without its newline) cut off and the job killed
 * with the reason, and close() killing it.
 */
import { describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/client';
import { JobStdioTransport, STDIO_LINE_MAX_BYTES, StdioStopError, type JobStdio } from '../../src/script/job-stdio-transport.ts';

/** A job whose stdout is a byte buffer; `answer` decides what the "server" writes for each line of stdin. */
function fakeJob(answer: (msg: any) => string | null) {
  let out = new Uint8Array(0);
  const waiters: Array<() => void> = [];
  const kills: string[] = [];
  let ended = false;
  const push = (text: string) => {
    const add = new TextEncoder().encode(text);
    const next = new Uint8Array(out.byteLength + add.byteLength);
    next.set(out);
    next.set(add, out.byteLength);
    out = next;
    for (const w of waiters.splice(0)) w();
  };
  const job: JobStdio = {
    async write(data) {
      if (ended) return { ok: false, message: 'not_found: the job has ended' };
      for (const line of new TextDecoder().decode(data).split('\n').filter(Boolean)) {
        const reply = answer(JSON.parse(line));
        if (reply !== null) push(reply);
      }
      return { ok: true };
    },
    async wait(offset) {
      if (out.byteLength <= offset && !ended) await new Promise<void>((r) => waiters.push(r));
      return { ended };
    },
    async read(offset, max) {
      const data = out.subarray(offset, offset + max);
      return { data, nextOffset: offset + data.byteLength, done: ended && offset + data.byteLength >= out.byteLength };
    },
    async kill(reason) {
      kills.push(reason);
      ended = true;
      for (const w of waiters.splice(0)) w();
    },
  };
  return { job, kills, push };
}

const INIT = {
  protocolVersion: '2025-06-18',
  capabilities: { tools: {} },
  serverInfo: { name: 'fake', version: '1' },
};

function server(msg: any): string | null {
  if (msg.method === 'initialize') return `${JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: INIT })}\n`;
  if (msg.method === 'tools/list')
    return `not json, a log line the server printed\n${JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { tools: [{ name: 'echo', inputSchema: { type: 'object' } }] } })}\r\n`;
  return null;
}

describe('JobStdioTransport', () => {
  it('carries initialize and tools/list as newline-delimited JSON-RPC; close() kills the job', async () => {
    const { job, kills } = fakeJob(server);
    const errors: string[] = [];
    const t = new JobStdioTransport(job);
    const client = new Client({ name: 't', version: '1' }, { capabilities: {} });
    await client.connect(t, { timeout: 5_000 });
    t.onerror = (e) => errors.push(e.message);
    const tools = await client.listTools();
    expect(tools.tools.map((x) => x.name)).toEqual(['echo']);
    expect(errors.join('\n')).toMatch(/not a JSON-RPC message: not json, a log line/);
    await client.close();
    expect(kills).toEqual(['the script that started this MCP server ended']);
  });

  it('a server that never answers initialize fails the connect after the timeout', async () => {
    const { job } = fakeJob(() => null);
    const client = new Client({ name: 't', version: '1' }, { capabilities: {} });
    await expect(client.connect(new JobStdioTransport(job), { timeout: 200 })).rejects.toThrow(/timed out|timeout/i);
  });

  it('a line longer than STDIO_LINE_MAX_BYTES without a newline stops the server, saying why', async () => {
    const { job, kills, push } = fakeJob(server);
    const t = new JobStdioTransport(job);
    const errors: string[] = [];
    t.onerror = (e) => errors.push(e.message);
    await t.start();
    push('x'.repeat(STDIO_LINE_MAX_BYTES + 1));
    for (let i = 0; i < 100 && kills.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    const why = "the server wrote a line longer than 4194304 bytes (4 MiB, the stdio transport's limit of one JSON-RPC message); it was stopped";
    expect(kills).toEqual([why]);
    expect(errors).toEqual([why]);
    expect(t.stopped).toEqual({ code: 'payload_too_large', message: why });
  });

  it('a job that may not go on (StdioStopError from a read or a write) stops the server with its reason, and later calls say it', async () => {
    const stop = { code: 'limit_reached' as const, message: 'stdio server s: limit reached — no subrequest left; it was stopped' };
    // Reads: the one that carries initialize's answer, then none.
    const { job, kills } = fakeJob(server);
    let reads = 0;
    const read = job.read.bind(job);
    job.read = async (offset, max) => {
      if (++reads > 1) throw new StdioStopError(stop);
      return read(offset, max);
    };
    const t = new JobStdioTransport(job);
    const client = new Client({ name: 't', version: '1' }, { capabilities: {} });
    await client.connect(t, { timeout: 5_000 });
    await expect(client.listTools()).rejects.toThrow();
    expect(t.stopped).toEqual(stop);
    expect(kills).toEqual([stop.message]);
    await expect(t.send({ jsonrpc: '2.0', id: 9, method: 'ping' })).rejects.toThrow(stop.message);

    // A write refused the same way: the send fails with the reason and the server is stopped.
    const w = fakeJob(server);
    w.job.write = async () => {
      throw new StdioStopError(stop);
    };
    const t2 = new JobStdioTransport(w.job);
    await t2.start();
    await expect(t2.send({ jsonrpc: '2.0', id: 1, method: 'ping' })).rejects.toThrow(stop.message);
    expect(t2.stopped).toEqual(stop);
    expect(w.kills).toEqual([stop.message]);
  });

  it('a whole line one byte over the bound, newline included in the same read, is not delivered', async () => {
    // 16 reads of 256 KiB hold 4 MiB; the 17th holds the last byte and the newline, so the line arrives complete.
    const { job, kills, push } = fakeJob(server);
    const t = new JobStdioTransport(job);
    const got: unknown[] = [];
    t.onmessage = (m) => got.push(m);
    await t.start();
    const body = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { data: '' } });
    push(`${body.slice(0, -3)}${'y'.repeat(STDIO_LINE_MAX_BYTES + 1 - body.length)}${body.slice(-3)}\n`);
    for (let i = 0; i < 100 && kills.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(kills).toHaveLength(1);
    expect(got).toEqual([]);
    expect(t.stopped?.code).toBe('payload_too_large');
  });

  it('a line of exactly STDIO_LINE_MAX_BYTES is delivered', async () => {
    const { job, kills, push } = fakeJob(server);
    const t = new JobStdioTransport(job);
    const got: unknown[] = [];
    t.onmessage = (m) => got.push(m);
    await t.start();
    const body = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { data: '' } });
    push(`${body.slice(0, -3)}${'y'.repeat(STDIO_LINE_MAX_BYTES - body.length)}${body.slice(-3)}\n`);
    for (let i = 0; i < 200 && got.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(got).toHaveLength(1);
    expect(kills).toEqual([]);
    await t.close();
  });
});
