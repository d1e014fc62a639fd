/**
 * Artifact retention end to end in workerd (`wrangler dev`, local D1 + R2): expired and fresh
 * artifacts are seeded into the gateway's state before it starts, the cron handler runs through
 * `GET /__scheduled`, and the local D1/R2 state is then read with wrangler's own CLI.
 * A kept artifact stays searchable with query_output (including a 5 MB one, streamed).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, startGateway, type Gateway } from './harness.ts';
import { artifactKey } from '../../src/store/artifacts.ts';
import type { StreamName } from '../../src/contracts/agent-protocol.ts';

const BUCKET = 'gatehouse-artifacts';
const HOUR = 3_600_000;
const BIG_LINES = 300_000;
const FATAL_AT = BIG_LINES - 10;

interface Seed {
  team: string;
  handle: string;
  stream: StreamName;
  body: string;
  expiresAt: number;
}

const now = Date.now();
const bigBody =
  Array.from({ length: BIG_LINES }, (_, i) => (i + 1 === FATAL_AT ? 'FATAL: disk quota exceeded near the end' : `[${i + 1}] step ok`)).join('\n') + '\n';
const SEEDS: Seed[] = [
  { team: 'team-a', handle: 'art_expiredAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', stream: 'stdout', body: 'old stdout secret\n', expiresAt: now - HOUR },
  { team: 'team-a', handle: 'art_expiredAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', stream: 'stderr', body: 'old stderr secret\n', expiresAt: now - 1 },
  { team: 'team-b', handle: 'art_expiredBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB', stream: 'stdout', body: 'team b old secret\n', expiresAt: now - 48 * HOUR },
  {
    team: 'team-a',
    handle: 'art_freshAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',
    stream: 'stdout',
    body: 'line one\nfresh needle here\nline three\n',
    expiresAt: now + 24 * HOUR,
  },
  { team: 'team-a', handle: 'art_bigAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', stream: 'stdout', body: bigBody, expiresAt: now + 24 * HOUR },
];
const expired = SEEDS.filter((s) => s.expiresAt <= now);
const fresh = SEEDS.filter((s) => s.expiresAt > now);

const env = {
  ...process.env,
  PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`,
  WRANGLER_SEND_METRICS: 'false',
  CI: 'true',
  NO_COLOR: '1',
};

function wrangler(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((res) => {
    const p = spawn(join(ROOT, 'node_modules/.bin/wrangler'), args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    p.on('close', (code) => res({ code: code ?? -1, stdout, stderr }));
  });
}

async function must(args: string[]): Promise<string> {
  const r = await wrangler(args);
  if (r.code !== 0) throw new Error(`wrangler ${args.join(' ')} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

const sqlText = (s: string) => `'${s.replace(/'/g, "''")}'`;

/** Local D1 rows via `wrangler d1 execute --json` (works while wrangler dev holds the same state). */
async function d1(persist: string, sql: string): Promise<Record<string, unknown>[]> {
  const out = await must(['d1', 'execute', 'DB', '--local', '--persist-to', persist, '--json', '--command', sql]);
  return JSON.parse(out.slice(out.indexOf('[')))[0].results;
}

async function r2Exists(persist: string, key: string): Promise<boolean> {
  const r = await wrangler(['r2', 'object', 'get', `${BUCKET}/${key}`, '--local', '--persist-to', persist, '--pipe']);
  if (r.code === 0) return true;
  if (/does not exist/i.test(r.stdout + r.stderr)) return false;
  throw new Error(`wrangler r2 object get ${key} failed:\n${r.stdout}\n${r.stderr}`);
}

/** Index rows and bodies, written the way the gateway writes them (same key scheme, same columns). */
async function seed(persist: string): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-seed-'));
  try {
    const pairs = SEEDS.map((s, i) => {
      const file = join(dir, `body${i}`);
      writeFileSync(file, s.body);
      return { key: artifactKey(s.team, s.handle, s.stream), file };
    });
    const pairsFile = join(dir, 'pairs.json');
    writeFileSync(pairsFile, JSON.stringify(pairs));
    // One bulk call: concurrent `r2 object put`s on one local state race each other.
    await must(['r2', 'bulk', 'put', BUCKET, '--filename', pairsFile, '--local', '--persist-to', persist, '--concurrency', '1']);
    const values = SEEDS.map(
      (s) =>
        `(${[s.handle, s.team, `job-${s.handle.slice(4, 12)}`, s.stream, artifactKey(s.team, s.handle, s.stream)].map(sqlText).join(', ')}, ` +
        `${Buffer.byteLength(s.body)}, ${s.body.split('\n').length - 1}, 0, ${s.expiresAt - 24 * HOUR}, ${s.expiresAt})`,
    );
    await must([
      'd1',
      'execute',
      'DB',
      '--local',
      '--persist-to',
      persist,
      '--command',
      `INSERT INTO artifacts (handle, team, job_id, stream, r2_key, bytes, lines, truncated, created_at, expires_at) VALUES ${values.join(', ')}`,
    ]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

let gw: Gateway;
let persist = '';

const connect = (team: string) => gw.mcp(team, ['artifacts:read']);

beforeAll(async () => {
  gw = await startGateway({
    beforeStart: async (dir) => {
      persist = dir;
      await seed(dir);
    },
  });
});
afterAll(async () => {
  await gw?.stop();
});

describe('artifact retention', () => {
  it('seeds bodies and rows that the gateway can see before the cron runs', async () => {
    const rows = await d1(persist, 'SELECT handle, stream FROM artifacts ORDER BY handle, stream');
    expect(rows).toHaveLength(SEEDS.length);
    for (const s of SEEDS) expect(await r2Exists(persist, artifactKey(s.team, s.handle, s.stream))).toBe(true);
  });

  it('the scheduled cleanup deletes expired artifacts from D1 and R2 together and keeps fresh ones', async () => {
    const r = await fetch(`${gw.url}/__scheduled?cron=*/15+*+*+*+*`);
    expect(r.status).toBe(200);
    // The handler finishes in waitUntil, after the response: wait for the rows to go.
    const deadline = Date.now() + 30_000;
    let rows: Record<string, unknown>[] = [];
    for (;;) {
      rows = await d1(persist, 'SELECT handle, stream, r2_key FROM artifacts ORDER BY handle, stream');
      if (rows.length === fresh.length || Date.now() > deadline) break;
      await new Promise((res) => setTimeout(res, 500));
    }
    expect(rows.map((x) => `${x.handle}/${x.stream}`).sort()).toEqual(fresh.map((s) => `${s.handle}/${s.stream}`).sort());
    for (const s of expired) expect(await r2Exists(persist, artifactKey(s.team, s.handle, s.stream)), `${s.handle}/${s.stream} body`).toBe(false);
    for (const s of fresh) expect(await r2Exists(persist, artifactKey(s.team, s.handle, s.stream)), `${s.handle}/${s.stream} body`).toBe(true);
  });

  it('keeps a fresh artifact searchable with query_output, for its own team only', async () => {
    const a = await connect('team-a');
    const b = await connect('team-b');
    try {
      const handle = fresh[0].handle;
      const ok = await a.callTool({ name: 'query_output', arguments: { artifactHandle: handle, queryTerms: ['NEEDLE'], contextLines: 1 } });
      expect(ok.isError).toBeFalsy();
      expect(ok.structuredContent).toMatchObject({
        artifactHandle: handle,
        matchCount: 1,
        matchStatus: 'matched',
        totalLines: 3,
        searchedStreams: ['stdout'],
        excerpts: [{ lineStart: 1, lineEnd: 3, content: 'line one\nfresh needle here\nline three', source: 'stdout' }],
      });
      const other = await b.callTool({ name: 'query_output', arguments: { artifactHandle: handle, queryTerms: ['needle'] } });
      expect(other.isError).toBe(true);
      expect(JSON.stringify(other.content)).toContain(`artifact \\"${handle}\\" not found`);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('answers not found for an artifact the cleanup removed', async () => {
    const a = await connect('team-a');
    try {
      const gone = await a.callTool({ name: 'query_output', arguments: { artifactHandle: expired[0].handle, queryTerms: ['secret'] } });
      expect(gone.isError).toBe(true);
      expect(JSON.stringify(gone.content)).toContain('not found (it may have expired)');
    } finally {
      await a.close();
    }
  });

  it('searches a multi-MB artifact streamed from R2 with exact line numbers', async () => {
    const a = await connect('team-a');
    try {
      const big = SEEDS.find((s) => s.handle.startsWith('art_big'))!;
      const r = await a.callTool({ name: 'query_output', arguments: { artifactHandle: big.handle, queryTerms: ['fatal:'], contextLines: 2 } });
      expect(r.isError).toBeFalsy();
      expect(r.structuredContent).toMatchObject({
        matchCount: 1,
        totalLines: BIG_LINES,
        totalBytes: Buffer.byteLength(bigBody),
        excerpts: [
          {
            lineStart: FATAL_AT - 2,
            lineEnd: FATAL_AT + 2,
            content: [
              `[${FATAL_AT - 2}] step ok`,
              `[${FATAL_AT - 1}] step ok`,
              'FATAL: disk quota exceeded near the end',
              `[${FATAL_AT + 1}] step ok`,
              `[${FATAL_AT + 2}] step ok`,
            ].join('\n'),
          },
        ],
      });
    } finally {
      await a.close();
    }
  });
});
