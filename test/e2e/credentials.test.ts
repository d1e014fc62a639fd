/**
 * Credentials that never enter the sandbox, end to end (docs/credentials.md): the real gateway
 * (`wrangler dev`, with a secrets key), a real agent in gVisor, the MCP SDK client. A team secret is
 * bound to `git.example.com` in the policy; an HTTPS upstream on 127.0.0.1 answers for that name and for
 * `other.example.com` with a certificate from a private CA the agent is given with `--extra-ca`.
 *
 * Attacks: a job `curl`s the bound host and the upstream sees the header, while the job reads its env,
 * every process's environ and cmdline, and greps the files under / for the value, and never finds it
 * (nor does its output, the audit, the logs); the same `curl` to an unbound host carries no header; the
 * egress row names the secret; once the secret is removed, a new job is refused with an error naming it.
 *
 * Nothing leaves 127.0.0.1: the agent's test mode (docs/network.md) sends both names to the upstream.
 * Needs runsc, openssl and curl (skipped outside CI when missing).
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { runCli } from '../support/cli.ts';
import { runJob } from '../support/e2e-jobs.ts';
import { makePrivateCa, openSslAvailable, type PrivateCa } from '../support/private-ca.ts';
import { type PrivateHttps, startPrivateHttps } from '../support/private-https.ts';
import { huntScript } from '../support/secret-hunt.ts';
import { call } from './fleet.ts';
import { hasCommand, requireParts, startEgressTestAgent, startGateway, type AgentProcess, type Gateway } from './harness.ts';

type S = Record<string, any>;

const READY = requireParts({ runsc: hasCommand('runsc'), openssl: openSslAvailable(), curl: hasCommand('curl') });
if (!READY) console.warn('credentials.test.ts: skipped — runsc, openssl or curl is not installed (allowed outside CI only)');
const maybe = READY ? describe : describe.skip;

const TEAM = 'creds';
const BOUND = 'git.example.com';
const UNBOUND = 'other.example.com';
/** Every value starts with this marker, so a job can search for it without its command holding the value. */
const MARK = 'gh-cred-e2e-';
const VALUE = `${MARK}${randomBytes(16).toString('hex')}`;
/** Generous: a fresh gVisor sandbox on a loaded machine; never a timing assertion. */
const JOB_MS = 240_000;

const CURL_BOUND = `curl -sS --max-time 60 https://${BOUND}/repo.git/info/refs`;
const CURL_UNBOUND = `curl -sS --max-time 60 https://${UNBOUND}/elsewhere`;
/** Everything a job could read the value from: its env, every process's environ and command line, the files under /. */
const HUNT = huntScript([`${MARK}[0-9a-f]*`]);

const policy = {
  ...DEFAULT_POLICY,
  executables: { allow: [...DEFAULT_POLICY.executables.allow, 'curl'] },
  shell: { enabled: true, allow: [HUNT] },
  sandbox: { minimum: 'gvisor' },
  network: {
    mode: 'allowlist',
    allow: [{ host: BOUND }, { host: UNBOUND }],
    credentials: [{ secret: 'GIT_TOKEN', hosts: [BOUND], scheme: 'Bearer' }],
  },
};

/** One HTTPS upstream for both names (the private CA's certificate lists both); it records what each request carried. */
const upstream = (ca: PrivateCa) =>
  startPrivateHttps(ca, {}, (req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end(`upstream-ok ${req.url}\n`));
/** What the upstream saw of requests for `host`. */
const seenFor = (host: string) => up.seen.filter((x) => x.host === host).map(({ host, url, authorization }) => ({ host, url, authorization }));

let gw: Gateway;
let client: Client;
let agent: AgentProcess;
let ca: PrivateCa;
let up: PrivateHttps;
let root: string;
let token: string;

const admin = async (method: string, path: string, body?: unknown) => {
  const r = await fetch(`${gw.url}/admin/v1${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, text: await r.text() };
};

const run = (args: S) => runJob(client, args, JOB_MS);

maybe('credentials: added by the egress proxy, never readable by the job', () => {
  beforeAll(async () => {
    ca = makePrivateCa([BOUND, UNBOUND]);
    up = await upstream(ca);
    root = mkdtempSync(join(tmpdir(), 'gatehouse-creds-ws-'));
    chmodSync(root, 0o777);
    gw = await startGateway({ vars: { GATEHOUSE_SECRETS_KEY: randomBytes(32).toString('base64') } });
    token = await gw.token({ team: TEAM, scopes: ['admin'] });
    expect((await admin('PUT', '/secrets/GIT_TOKEN', { value: VALUE })).status).toBe(201);
    await gw.putPolicy(TEAM, policy);
    client = await gw.mcp(TEAM, ['execute', 'artifacts:read']);
    agent = await startEgressTestAgent(gw, TEAM, {
      root,
      capacity: 1,
      agentId: 'creds-gvisor',
      extraArgs: ['--extra-ca', ca.caFile, '--warm', '0'],
      testHosts: { [BOUND]: up.port, [UNBOUND]: up.port },
    });
    await agent.ready;
  }, 300_000);

  afterAll(async () => {
    await client?.close();
    await agent?.stop();
    await gw?.stop();
    await up?.close();
    ca?.remove();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  const outputs: string[] = [];

  it(
    'a job curls the bound host: the upstream gets the header, the job does not see it, the egress row names the secret',
    async () => {
      const r = await run({ command: 'curl', args: CURL_BOUND.split(' ').slice(1) });
      outputs.push(r.seen);
      expect(r.s.exit_code, `${r.t}\n--- agent log:\n${agent.logs()}`).toBe(0);
      expect(r.t).toContain('upstream-ok /repo.git/info/refs');
      expect(seenFor(BOUND)).toEqual([{ host: BOUND, url: '/repo.git/info/refs', authorization: `Bearer ${VALUE}` }]);
      expect(r.connections.find((c) => c.host === BOUND)).toMatchObject({ decision: 'allowed', credential: 'GIT_TOKEN' });
      expect(r.seen).not.toContain(VALUE);
    },
    JOB_MS,
  );

  it(
    'a request to a host the secret is not bound to carries no header',
    async () => {
      const r = await run({ command: 'curl', args: CURL_UNBOUND.split(' ').slice(1) });
      outputs.push(r.seen);
      expect(r.s.exit_code, r.t).toBe(0);
      expect(seenFor(UNBOUND)).toEqual([{ host: UNBOUND, url: '/elsewhere', authorization: undefined }]);
      expect(r.connections.find((c) => c.host === UNBOUND)?.credential ?? null).toBeNull();
    },
    JOB_MS,
  );

  it(
    'the job cannot read the value: not in its env, any /proc/*/environ or cmdline, or a file under /',
    async () => {
      // A decoy in the workspace with the value's marker: the hunt must find it, or it searched nothing.
      writeFileSync(join(root, 'decoy.txt'), `${MARK}feedface\n`);
      const r = await run({ command: HUNT });
      outputs.push(r.seen);
      // The hunt ran to its end (a refusal or a crash would also "not find" the value).
      expect(r.t, r.t).toContain('hunt-done');
      expect(r.t).toContain(`${MARK}feedface`);
      expect(r.t).toContain('PATH=');
      expect(r.seen).not.toContain(VALUE);
    },
    JOB_MS,
  );

  it('the value is in no audit row, egress listing, or log; the audit egress listing names the secret', async () => {
    const audit = await admin('GET', '/audit?limit=200');
    const egress = await admin('GET', '/audit/egress?limit=200');
    expect(audit.status).toBe(200);
    expect(egress.status).toBe(200);
    const rows = JSON.parse(egress.text).connections as S[];
    expect(rows.filter((c) => c.host === BOUND).map((c) => c.credential)).toEqual(['GIT_TOKEN']);
    expect(rows.filter((c) => c.host === UNBOUND).map((c) => c.credential ?? null)).toEqual([null]);
    // The CLI's listing shows the name in its CREDENTIAL column.
    const cli = await runCli(gw.url, token, ['audit', 'egress']);
    expect(cli.code, cli.stderr).toBe(0);
    expect(cli.stdout).toMatch(/^STARTED\s+JOB\s+HOST\s+METHOD\s+DECISION\s+UP\/DOWN\s+CREDENTIAL\s+REASON/m);
    expect(cli.stdout).toMatch(new RegExp(`${BOUND.replace(/\./g, '\\.')}:443\\s+CONNECT\\s+allowed\\s+\\S+ B\\s+GIT_TOKEN\\s`));
    for (const t of [audit.text, egress.text, cli.stdout, cli.stderr, gw.logs(), agent.logs(), ...outputs]) expect(t).not.toContain(VALUE);
  });

  it(
    'after the secret is removed, a new job is refused with an error naming the secret and how to set it',
    async () => {
      expect((await admin('DELETE', '/secrets/GIT_TOKEN')).status).toBe(200);
      const before = up.seen.length;
      const r = await call(client, 'execute', { command: 'curl', args: CURL_BOUND.split(' ').slice(1), timeout_ms: 60_000 }, JOB_MS);
      expect(r.r.isError, r.t).toBe(true);
      expect(r.t).toContain('"GIT_TOKEN"');
      expect(r.t).toContain('gatehouse secrets set GIT_TOKEN');
      expect(up.seen.length).toBe(before);
    },
    JOB_MS,
  );
});
