/**
 * Credentials at the team DO (secrets.ts, job-lifecycle.ts, egress.ts), over node:sqlite for the DO's
 * storage: a job whose grant binds a team secret gets its value in `job.start` only (never in the stored
 * spec or any row); a job whose secret was removed is refused with an error naming the secret and how to
 * set it; the egress log names the secret a connection used, and an object from before that column
 * gains it without losing rows.
 */
import { randomBytes } from 'node:crypto';
import type { DatabaseSync } from 'node:sqlite';
import { describe, expect, it } from 'vitest';
import type { JobSpec } from '../../src/contracts/agent-protocol.ts';
import type { NetworkGrant } from '../../src/contracts/network.ts';
import { migrate } from '../../src/dispatch/capability-host.ts';
import { dispatchHost, sqlHost } from './sql-host.ts';
import { connect, HB, request, say, setup } from './team-fixture.ts';

const VALUE = `ghp_${randomBytes(12).toString('hex')}`;

const grant: NetworkGrant = {
  mode: 'allowlist',
  allow: [{ host: 'git.example.com' }],
  unlisted: 'deny',
  maxBytesUp: 1 << 20,
  maxBytesDown: 1 << 20,
  source: 'network',
  credentials: [{ secret: 'GIT_TOKEN', hosts: ['git.example.com'], header: 'Authorization', scheme: 'Bearer' }],
};

function rig(db?: DatabaseSync) {
  const host = dispatchHost({ heartbeatMs: HB, db, env: { GATEHOUSE_WORKERS_PLAN: 'paid', GATEHOUSE_SECRETS_KEY: randomBytes(32).toString('base64') } });
  return setup({ host });
}

const submit = (t: ReturnType<typeof rig>, id: string) => {
  const r = request(id, { agent: 'a1' });
  return t.c.jobs.submit({ ...r, spec: { ...r.spec, command: 'git', args: ['clone', 'https://git.example.com/x'], network: grant } as JobSpec });
};

/** Every text value in every table of the object's storage. */
function everyCell(t: ReturnType<typeof rig>): string {
  const db = t.host.db;
  const tables = db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table'`).all() as { name: string }[];
  return tables.map((x) => JSON.stringify(db.prepare(`SELECT * FROM "${x.name}"`).all())).join('\n');
}

describe('team secrets reach a job only in its start message', () => {
  it('sends the value in job.start; the stored rows hold it nowhere (the sealed row is not the value)', async () => {
    const t = rig();
    expect(await t.c.secrets.put('GIT_TOKEN', VALUE, 'admin@example.com')).toMatchObject({ ok: true });
    const ws = await connect(t, 'a1');
    expect(await submit(t, 'j1')).toMatchObject({ ok: true, state: 'running' });
    const [start] = ws.of('job.start') as { credentials?: unknown; spec: { network?: unknown } }[];
    expect(start.credentials).toEqual([{ secret: 'GIT_TOKEN', value: VALUE }]);
    expect(JSON.stringify(start.spec)).not.toContain(VALUE);
    expect(everyCell(t)).not.toContain(VALUE);
    expect(JSON.stringify(t.host.audits)).not.toContain(VALUE);
  });

  it('refuses a job whose bound secret was removed, naming the secret and how to set it; the agent gets nothing', async () => {
    const t = rig();
    await t.c.secrets.put('GIT_TOKEN', VALUE, 'admin@example.com');
    expect(t.c.secrets.delete('GIT_TOKEN')).toBe(true);
    const ws = await connect(t, 'a1');
    const answer = await submit(t, 'j2');
    expect(answer).toMatchObject({ ok: false, code: 'not_found' });
    const text = JSON.stringify(answer);
    expect((answer as { message: string }).message).toContain('the secret "GIT_TOKEN", which the team does not have');
    expect(text).toContain('gatehouse secrets set GIT_TOKEN');
    expect(ws.of('job.start')).toEqual([]);
  });

  it('refuses a bound job when the deployment has no secrets key, saying which setting is missing', async () => {
    const host = dispatchHost({ heartbeatMs: HB, env: { GATEHOUSE_WORKERS_PLAN: 'paid' } });
    const t = setup({ host });
    const ws = await connect(t, 'a1');
    const answer = await submit(t as ReturnType<typeof rig>, 'j3');
    expect(answer).toMatchObject({ ok: false, code: 'config_error' });
    expect(JSON.stringify(answer)).toContain('GATEHOUSE_SECRETS_KEY is not set');
    expect(ws.of('job.start')).toEqual([]);
  });
});

describe('egress log names the credential a connection used', () => {
  it('keeps the secret name on the row; job_status and the audit listing show it; no row holds the value', async () => {
    const t = rig();
    await t.c.secrets.put('GIT_TOKEN', VALUE, 'admin@example.com');
    const ws = await connect(t, 'a1');
    await submit(t, 'j1');
    const base = {
      port: 443,
      address: '127.0.0.1',
      method: 'CONNECT',
      decision: 'allowed' as const,
      bytesUp: 1,
      bytesDown: 2,
      startedAt: new Date(1_000_000).toISOString(),
      ms: 1,
    };
    await say(t, ws, {
      type: 'egress.log',
      jobId: 'j1',
      connections: [
        { ...base, host: 'git.example.com', reason: 'network.allow[0]', credential: 'GIT_TOKEN' },
        { ...base, host: 'other.example.com', reason: 'network.allow[1]' },
      ],
    });
    const n = t.c.egress.jobNetwork('j1');
    expect(n?.connections.map((c) => [c.host, c.credential])).toEqual([
      ['git.example.com', 'GIT_TOKEN'],
      ['other.example.com', null],
    ]);
    expect(t.c.egress.connections({ limit: 10 }).find((c) => c.host === 'git.example.com')?.credential).toBe('GIT_TOKEN');
    expect(everyCell(t)).not.toContain(VALUE);
  });

  it('an object from before the column gains it; its old rows show no credential', () => {
    const host = sqlHost();
    migrate(host, 'egress', [
      {
        id: '1-egress',
        sql: [
          `CREATE TABLE egress_counts (job_id TEXT PRIMARY KEY, listed INTEGER NOT NULL, dropped INTEGER NOT NULL, asks INTEGER NOT NULL)`,
          `CREATE TABLE egress_asks (job_id TEXT NOT NULL, ask_id TEXT NOT NULL, agent TEXT NOT NULL, approval_id TEXT, host TEXT NOT NULL, port INTEGER NOT NULL,
            method TEXT, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, decision TEXT, decided_by TEXT, PRIMARY KEY (job_id, ask_id))`,
        ],
      },
      {
        id: '2-egress-log',
        sql: [
          `CREATE TABLE egress_connections (job_id TEXT NOT NULL, seq INTEGER NOT NULL, host TEXT NOT NULL, port INTEGER NOT NULL, address TEXT, method TEXT,
            decision TEXT NOT NULL, reason TEXT NOT NULL, bytes_up INTEGER NOT NULL, bytes_down INTEGER NOT NULL, started_at INTEGER NOT NULL, ms INTEGER NOT NULL,
            logged_at INTEGER NOT NULL, PRIMARY KEY (job_id, seq))`,
          `INSERT INTO egress_connections VALUES ('old', 1, 'h.example', 443, NULL, 'CONNECT', 'allowed', 'r', 1, 2, 5000, 3, 5000)`,
        ],
      },
    ]);
    const t = rig(host.db);
    expect(t.c.egress.connections({ limit: 10 })).toEqual([expect.objectContaining({ job_id: 'old', host: 'h.example', credential: null })]);
  });
});
