/**
 * Descriptors the agent inherited never reach a job. An agent is often started with more open
 * than 0-2: a `flock` wrapper's lock file, a CI runner's or a service manager's pipes and sockets,
 * a shell's redirections. Here the real agent (`node executor/main.ts`) is started by a shell with
 * a file opened for append (fds 7 and 200), a pipe (201) and a TCP socket (202) to a listener of
 * this test, under every driver that works here. A job lists its descriptors, writes to each of
 * those numbers directly and through /proc/self/fd, and must see 0-2 only and change nothing on
 * the host; no process the agent started for its sandboxes (start shells, bwrap, runsc) holds
 * them either.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { PROTOCOL_VERSION, type JobExit, type JobSpec } from '../../src/contracts/agent-protocol.ts';
import type { SandboxReuse } from '../../src/contracts/sandbox-reuse.ts';
import { FakeEdge } from '../executor/fake-edge.ts';
import { jobSpec, requireTool } from '../executor/helpers.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const MiB = 1024 * 1024;
const LIMITS = { inlineBytes: 64_000, artifactBytes: MiB, memoryBytes: 256 * MiB, maxProcesses: 64, maxOpenFiles: 256, tmpBytes: 16 * MiB };
/** The descriptors the launching shell hands the agent beyond 0-2 (the file twice: a low and a high number). */
const INHERITED = [7, 200, 201, 202];

const cases: { kind: 'none' | 'bwrap' | 'gvisor'; reuse?: SandboxReuse }[] = [
  { kind: 'none' },
  { kind: 'bwrap' },
  { kind: 'gvisor' },
  { kind: 'gvisor', reuse: { jobs: 100, seconds: 600 } },
];

for (const c of cases) {
  const label = c.reuse ? `${c.kind} with sandbox reuse` : c.kind;
  const d = requireTool(c.kind) ? describe : describe.skip;

  d(`descriptors the agent inherited, under ${label}`, () => {
    const token = `agent-token-${randomBytes(16).toString('hex')}`;
    let edge: FakeEdge;
    let agent: ChildProcess;
    let agentLog = '';
    let base: string;
    let stateDir: string;
    let hostFile: string;
    let pipeOut: string;
    let listener: Server;
    let socketBytes = 0;
    /** What the agent's inherited descriptors point at (/proc/PID/fd links). */
    let links: string[] = [];
    let n = 0;

    beforeAll(async () => {
      base = realpathSync(mkdtempSync(join(tmpdir(), `gh-fds-${c.kind}-`)));
      mkdirSync(join(base, 'workspace'));
      writeFileSync(join(base, 'agent.token'), `${token}\n`, { mode: 0o600 });
      hostFile = join(base, 'inherited.log');
      writeFileSync(hostFile, 'host\n');
      pipeOut = join(base, 'pipe.out');
      writeFileSync(pipeOut, '');
      stateDir = mkdtempSync(join(tmpdir(), `gh-fds-state-${c.kind}-`));
      listener = createServer((s) => {
        s.on('data', (b: Buffer) => (socketBytes += b.length));
        s.on('error', () => {});
      });
      await new Promise<void>((r) => listener.listen(0, '127.0.0.1', () => r()));
      const port = (listener.address() as { port: number }).port;
      edge = new FakeEdge();
      edge.token = token;
      await edge.start();
      // As `flock`, a CI runner or a shell would: the agent replaces the shell and keeps what it opened.
      const launch = 'exec "$@" 7>>"$GH_FILE" 200>>"$GH_FILE" 201> >(exec cat >>"$GH_PIPE_OUT") 202<>"/dev/tcp/127.0.0.1/$GH_PORT"';
      agent = spawn(
        '/bin/bash',
        [
          '-c',
          launch,
          'gh-launch',
          process.execPath,
          join(ROOT, 'executor/main.ts'),
          '--url',
          edge.url,
          '--token-file',
          join(base, 'agent.token'),
          '--root',
          join(base, 'workspace'),
          '--sandbox',
          c.kind,
          '--capacity',
          '2',
          '--warm',
          '1',
          '--id',
          `fds-${c.kind}`,
          '--state-dir',
          stateDir,
          ...(c.kind === 'none' ? ['--allow-no-isolation'] : []),
        ],
        {
          cwd: ROOT,
          detached: true,
          stdio: ['ignore', 'pipe', 'pipe'],
          env: { ...process.env, GH_FILE: hostFile, GH_PIPE_OUT: pipeOut, GH_PORT: String(port) },
        },
      );
      agent.stdout!.on('data', (b: Buffer) => (agentLog += b));
      agent.stderr!.on('data', (b: Buffer) => (agentLog += b));
      await edge
        .next((m) => m.type === 'hello', 60_000)
        .catch((e: Error) => {
          throw new Error(`${e.message}\nagent log:\n${agentLog}`);
        });
      edge.send({ type: 'welcome', v: PROTOCOL_VERSION, team: 'fds', heartbeatMs: 1000 });
      // The scenario holds: the agent itself has every one of them open.
      links = INHERITED.map((fd) => readlinkSync(`/proc/${agent.pid}/fd/${fd}`));
      expect(links[0]).toBe(hostFile);
      expect(links[2]).toMatch(/^pipe:/);
      expect(links[3]).toMatch(/^socket:/);
      // Warm up: the sandboxes and start shells are made for the job's limits.
      expect((await job({ command: 'true' })).state, agentLog).toBe('exited');
    }, 120_000);

    afterAll(async () => {
      if (agent?.pid && agent.exitCode === null && agent.signalCode === null) {
        const gone = new Promise((r) => agent.once('exit', r));
        try {
          process.kill(-agent.pid, 'SIGTERM');
        } catch {
          /* gone */
        }
        await Promise.race([gone, new Promise((r) => setTimeout(r, 15_000))]);
        try {
          process.kill(-agent.pid, 'SIGKILL');
        } catch {
          /* gone */
        }
      }
      await edge?.stop();
      listener?.close();
      if (base) rmSync(base, { recursive: true, force: true });
      if (stateDir) rmSync(stateDir, { recursive: true, force: true });
    });

    async function job(spec: Partial<JobSpec>): Promise<JobExit> {
      const jobId = `fds-${c.kind}-${++n}`;
      edge.send({ type: 'job.start', spec: jobSpec({ jobId, limits: LIMITS, timeoutMs: 20_000, ...(c.reuse ? { reuse: c.reuse } : {}), ...spec }) });
      const m = await edge.next((x) => (x.type === 'job.exit' || x.type === 'job.error') && x.jobId === jobId, 40_000);
      expect(m.type, JSON.stringify(m)).toBe('job.exit');
      edge.send({ type: 'job.ack', jobId });
      return m as unknown as JobExit;
    }

    it('a job sees descriptors 0-2 only, and cannot write to what the agent inherited', async () => {
      const numbers = [3, 4, 5, 6, ...INHERITED, 251, 255].join(' ');
      // dash cannot name a descriptor above 9: bash does the writing.
      const command = [
        'echo fds:',
        'ls /proc/$$/fd',
        'echo end-fds',
        `bash -c 'for fd in ${numbers}; do { echo "INJECTED-$fd" >&$fd; } 2>/dev/null && echo "wrote $fd"; { echo "INJECTED-proc-$fd" >/proc/self/fd/$fd; } 2>/dev/null && echo "reopened $fd"; done; echo tried'`,
      ].join('; ');
      // Twice: a cold start and (bwrap, none) a start that waited for its job, or (gVisor reuse) a reused sandbox.
      for (let i = 0; i < 2; i++) {
        const exit = await job({ mode: 'shell', command });
        expect(exit, agentLog.slice(-2000)).toMatchObject({ state: 'exited', exitCode: 0 });
        expect(exit.stdout).toContain('tried');
        const fds = /fds:\n([\s\S]*)end-fds\n/
          .exec(exit.stdout)?.[1]
          .trim()
          .split('\n')
          .map(Number)
          .sort((a, b) => a - b);
        expect(fds).toEqual([0, 1, 2]);
        expect(exit.stdout).not.toMatch(/wrote|reopened/);
      }
      expect(readFileSync(hostFile, 'utf8')).toBe('host\n');
      expect(readFileSync(pipeOut, 'utf8')).toBe('');
      expect(socketBytes).toBe(0);
    }, 120_000);

    it('no process the agent started for its sandboxes holds them (only the agent and its watchdog do)', async () => {
      await job({ command: 'true' });
      // After a job that ended by itself a start (bwrap, none) or a warm or parked sandbox (gVisor) waits.
      const helpers = () => descendants(agent.pid!).filter((p) => !NOT_HELPERS.includes(commOf(p)));
      for (let i = 0; i < 100 && !helpers().length; i++) await new Promise((r) => setTimeout(r, 100));
      expect(helpers().length, 'the agent has a start shell or sandbox waiting').toBeGreaterThan(0);
      // A start holds them for the moment before its first line closes them; a helper that keeps one holds it for good.
      let holders: ReturnType<typeof holdersOf> = [];
      for (let i = 0; i < 100; i++) {
        holders = holdersOf(new Set(links)).filter((p) => p.pid !== agent.pid && !NOT_HELPERS.includes(p.comm));
        if (!holders.length) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(holders).toEqual([]);
    }, 60_000);
  });
}

/** The agent's children that are not its sandboxes' helpers: its watchdog (node) and the inherited pipe's reader (cat). */
const NOT_HELPERS = ['node', 'cat'];

function commOf(pid: number | string): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
}

/** Processes (but ours) with an open descriptor whose /proc link is in `wanted`. */
function holdersOf(wanted: Set<string>): { pid: number; comm: string; fd: string; link: string }[] {
  const out: { pid: number; comm: string; fd: string; link: string }[] = [];
  for (const p of readdirSync('/proc').filter((x) => /^\d+$/.test(x))) {
    if (Number(p) === process.pid) continue;
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${p}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      let link: string;
      try {
        link = readlinkSync(`/proc/${p}/fd/${fd}`);
      } catch {
        continue;
      }
      if (!wanted.has(link)) continue;
      out.push({ pid: Number(p), comm: commOf(p), fd, link });
    }
  }
  return out;
}

/** Pids below `pid`. */
function descendants(pid: number): number[] {
  const ps = execFileSync('ps', ['-eo', 'pid=,ppid='], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .map((l) => l.trim().split(/\s+/).map(Number));
  const out: number[] = [];
  const walk = (p: number) => {
    for (const [c, pp] of ps)
      if (pp === p) {
        out.push(c);
        walk(c);
      }
  };
  walk(pid);
  return out;
}
