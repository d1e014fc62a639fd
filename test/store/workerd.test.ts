/**
 * The artifact store inside workerd (`wrangler dev` of a tiny test Worker, local D1 + R2):
 * what the in-memory fakes cannot show — FixedLengthStream uploads, R2 suffix ranges, real D1 SQL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, freePort, stopGroup } from '../e2e/harness.ts';

const CONFIG = join(ROOT, 'test/store/workerd/wrangler.toml');
const WRANGLER = join(ROOT, 'node_modules/.bin/wrangler');
const env = { ...process.env, PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`, WRANGLER_SEND_METRICS: 'false', CI: 'true', NO_COLOR: '1' };
const HOUR = 3_600_000;
const T0 = 1_800_000_000_000;

let dev: ChildProcess;
let url = '';
let stateDir = '';
let logs = '';

function run(args: string[]): Promise<string> {
  return new Promise((res, rej) => {
    const p = spawn(WRANGLER, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    p.on('close', (code) => (code === 0 ? res(out) : rej(new Error(`wrangler ${args.join(' ')}: ${out}`))));
  });
}

beforeAll(async () => {
  stateDir = mkdtempSync(join(tmpdir(), 'gatehouse-store-'));
  await run(['d1', 'migrations', 'apply', 'DB', '--local', '--config', CONFIG, '--persist-to', stateDir]);
  const port = await freePort();
  const inspector = await freePort();
  url = `http://127.0.0.1:${port}`;
  dev = spawn(
    WRANGLER,
    [
      'dev',
      '--config',
      CONFIG,
      '--ip',
      '127.0.0.1',
      '--port',
      String(port),
      '--inspector-port',
      String(inspector),
      '--persist-to',
      stateDir,
      '--show-interactive-dev-session=false',
      '--log-level',
      'warn',
    ],
    { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  dev.stdout!.on('data', (d) => (logs += d));
  dev.stderr!.on('data', (d) => (logs += d));
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (dev.exitCode !== null) throw new Error(`wrangler dev exited:\n${logs}`);
    try {
      if ((await fetch(`${url}/healthz`)).ok) break;
    } catch {
      /* not up yet */
    }
    if (Date.now() > deadline) throw new Error(`test worker did not start:\n${logs}`);
    await new Promise((r) => setTimeout(r, 150));
  }
});

afterAll(async () => {
  if (dev) await stopGroup(dev);
  if (stateDir) rmSync(stateDir, { recursive: true, force: true });
});

async function put(q: Record<string, string | number>, body: string | Uint8Array) {
  const r = await fetch(`${url}/put?${new URLSearchParams(Object.entries(q).map(([k, v]) => [k, String(v)]))}`, { method: 'PUT', body });
  return r.json() as Promise<{ ok: boolean; value?: { bytes: number }; error?: { code: string; message: string } }>;
}
async function get(path: string, q: Record<string, string | number>) {
  return (await fetch(`${url}${path}?${new URLSearchParams(Object.entries(q).map(([k, v]) => [k, String(v)]))}`)).json();
}
async function query(team: string, input: unknown, now = T0) {
  return (
    await fetch(`${url}/query?team=${team}&now=${now}`, { method: 'POST', body: JSON.stringify(input), headers: { 'Content-Type': 'application/json' } })
  ).json();
}

describe('artifact store in workerd', () => {
  const big = Array.from({ length: 200_000 }, (_, i) => (i + 1 === 199_000 ? 'panic: index out of range' : `ok ${i + 1}`)).join('\n') + '\n';

  it('streams a multi-MB body into R2 through FixedLengthStream (indexed in D1 as before the index moved)', async () => {
    const r = await put({ team: 'ta', handle: 'art_big1', length: Buffer.byteLength(big), lines: 200_000, now: T0 }, big);
    expect(r).toEqual({ ok: true, value: { bytes: Buffer.byteLength(big) } });
    const rows = await get('/rows', { team: 'ta', handle: 'art_big1', now: T0 });
    expect(rows).toEqual([
      expect.objectContaining({
        handle: 'art_big1',
        stream: 'stdout',
        r2Key: 't/ta/a/art_big1/stdout',
        bytes: Buffer.byteLength(big),
        lines: 200_000,
        expiresAt: T0 + 24 * HOUR,
      }),
    ]);
  });

  it('rejects a body shorter or longer than its Content-Length and leaves no row', async () => {
    const short = await put({ team: 'ta', handle: 'art_short', length: 100, now: T0 }, 'only a few bytes');
    expect(short).toMatchObject({ ok: false, error: { code: 'invalid_argument' } });
    expect(await put({ team: 'ta', handle: 'art_long', length: 3, now: T0 }, 'more than three')).toMatchObject({
      ok: false,
      error: { code: 'invalid_argument' },
    });
    expect(await get('/rows', { team: 'ta', handle: 'art_short', now: T0 })).toEqual([]);
    expect(await get('/rows', { team: 'ta', handle: 'art_long', now: T0 })).toEqual([]);
  });

  it('reads a tail with an R2 suffix range, starting at a line boundary', async () => {
    const r = (await get('/tail', { team: 'ta', handle: 'art_big1', bytes: 64, now: T0 })) as { tail: string };
    expect(big.endsWith(r.tail)).toBe(true);
    expect(r.tail.endsWith('ok 200000\n')).toBe(true);
    expect(r.tail.startsWith('ok ')).toBe(true);
  });

  it('searches the R2 body with query_output logic, scoped to the team', async () => {
    const mine = await query('ta', { artifactHandle: 'art_big1', queryTerms: ['PANIC'], contextLines: 1 });
    expect(mine).toMatchObject({
      ok: true,
      value: {
        matchCount: 1,
        totalLines: 200_000,
        excerpts: [{ lineStart: 198_999, lineEnd: 199_001, content: 'ok 198999\npanic: index out of range\nok 199001' }],
      },
    });
    expect(await query('tb', { artifactHandle: 'art_big1', queryTerms: ['panic'] })).toMatchObject({ ok: false, error: { code: 'not_found' } });
  });

  it('retries of an upload replace the body and row', async () => {
    await put({ team: 'ta', handle: 'art_retry', length: 6, now: T0 }, 'first\n');
    expect(await put({ team: 'ta', handle: 'art_retry', length: 7, now: T0 + 1 }, 'second\n')).toMatchObject({ ok: true });
    expect(await get('/tail', { team: 'ta', handle: 'art_retry', bytes: 100, now: T0 + 1 })).toEqual({ tail: 'second\n' });
  });

  it('the legacy cleanup deletes expired bodies and D1 rows and keeps fresh ones', async () => {
    for (let i = 0; i < 120; i++) await put({ team: 'tc', handle: `art_old${i}`, length: 4, hours: 1, now: T0 }, 'old\n');
    await put({ team: 'tc', handle: 'art_new', length: 4, hours: 48, now: T0 }, 'new\n');
    expect(await get('/cleanup', { now: T0 + 2 * HOUR })).toEqual({ deleted: 120 });
    expect(await get('/rows', { team: 'tc', handle: 'art_old7', now: 0 })).toEqual([]);
    expect(await get('/r2', { key: 't/tc/a/art_old7/stdout' })).toEqual({ exists: false });
    expect(await get('/r2', { key: 't/tc/a/art_old119/stdout' })).toEqual({ exists: false });
    expect(await get('/rows', { team: 'tc', handle: 'art_new', now: T0 })).toHaveLength(1);
    expect(await get('/r2', { key: 't/tc/a/art_new/stdout' })).toEqual({ exists: true });
  });
});
