/**
 * The attack suite: what a hostile job tries, run as jobs against a real agent process
 * (`node executor/main.ts`) with a real sandbox, connected to a stand-in gateway. Every attack
 * runs with a short timeout and must end in a truthful terminal state within timeout + grace;
 * afterwards no process of the job is left on the host, the agent's heartbeats never stopped,
 * and the next `true` job succeeds within 1 s. The sizes that would hurt this shared machine
 * if containment failed (8 GiB of memory, 10 GiB files) sit behind the job's limits (256 MiB
 * memory, 64 MiB files and /tmp, 256 MiB of disk writes), which are in place before they run.
 *
 * Each outcome and its time to contain is printed as a table row (docs/security.md, "Attack suite").
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { PROTOCOL_VERSION, type JobExit, type JobSpec } from '../../src/contracts/agent-protocol.ts';
import { FakeEdge } from '../executor/fake-edge.ts';
import { jobSpec, requireTool } from '../executor/helpers.ts';
import type { SandboxReuse } from '../../src/contracts/sandbox-reuse.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const MiB = 1024 * 1024;
/** Limits every attack job runs under (what a team policy sets). */
const ATTACK_LIMITS = {
  inlineBytes: 40_000,
  artifactBytes: 4 * MiB,
  memoryBytes: 256 * MiB,
  maxProcesses: 64,
  maxOpenFiles: 256,
  maxFileBytes: 64 * MiB,
  cpuSeconds: 30,
  tmpBytes: 64 * MiB,
  diskWriteBytes: 256 * MiB,
};
/** Past the job's timeout, how long the agent may take to report (a loaded CI machine). */
const GRACE_MS = 10_000;
const HEARTBEAT_MS = 250;
/** gVisor sandboxes the agent keeps started (as many as it runs at once, so a job never waits for a refill). */
const WARM = 2;
/** Largest gap between heartbeats that still counts as "never stopped" on a loaded machine. */
const MAX_HEARTBEAT_GAP_MS = 3000;
/** A healthy agent runs the next `true` within this; a wedged one takes its 30 s deadline. Generous: on a loaded 2-CPU
 * host a reused sandbox that the attack spoiled is replaced first (a fresh runsc start, ~1–2 s there). */
const NEXT_JOB_MAX_MS = 5000;

type Msg = Record<string, unknown>;
interface Row {
  attack: string;
  outcome: string;
  ms: number;
}

/** `reuse`: every job carries the team's sandbox.reuse (gVisor then runs jobs one after another in one sandbox). */
export function attackSuite(kind: 'gvisor' | 'bwrap', o: { reuse?: SandboxReuse } = {}): void {
  const available = requireTool(kind);
  const d = available ? describe : describe.skip;
  const label = o.reuse ? `${kind} with sandbox reuse` : kind;
  // The integer part of the `sleep`/comment markers the host's process list is searched for: one per suite, because
  // vitest runs the suites' files side by side and one suite's live job must not count as another's leftover.
  const M = o.reuse ? 3000 : kind === 'gvisor' ? 2000 : 1000;

  d(`attacks under ${label}`, () => {
    const token = `agent-token-${randomBytes(24).toString('hex')}`;
    let edge: FakeEdge;
    let agent: ChildProcess;
    let agentLog = '';
    let base: string;
    let root: string;
    let stateDir: string;
    const rows: Row[] = [];
    let n = 0;

    beforeAll(async () => {
      // The workspace's parent holds the agent's token file and a `.gatehouse/` like `npm start` makes.
      base = realpathSync(mkdtempSync(join(tmpdir(), `gh-attack-${kind}-`)));
      root = join(base, 'workspace');
      mkdirSync(root);
      mkdirSync(join(base, '.gatehouse'));
      writeFileSync(join(base, 'agent.token'), `${token}\n`, { mode: 0o600 });
      writeFileSync(join(base, '.gatehouse', 'tokens.json'), JSON.stringify({ agent: token }), { mode: 0o600 });
      stateDir = mkdtempSync(join(tmpdir(), `gh-attack-state-${kind}-`));
      edge = new FakeEdge();
      edge.token = token;
      await edge.start();
      agent = spawn(
        process.execPath,
        [
          join(ROOT, 'executor/main.ts'),
          '--url',
          edge.url,
          '--token-file',
          join(base, 'agent.token'),
          '--root',
          root,
          '--sandbox',
          kind,
          '--capacity',
          '2',
          '--warm',
          String(WARM),
          '--id',
          `attack-${kind}`,
          '--state-dir',
          stateDir,
        ],
        {
          cwd: ROOT,
          detached: true,
          stdio: ['ignore', 'pipe', 'pipe'],
          // The token in the agent's environment too: a job must not reach it there either.
          env: { ...process.env, GATEHOUSE_AGENT_TOKEN: token },
        },
      );
      agent.stdout!.on('data', (b: Buffer) => (agentLog += b));
      agent.stderr!.on('data', (b: Buffer) => (agentLog += b));
      await edge.next((m) => m.type === 'hello', 60_000);
      // The agent says which runsc it runs and which mechanism enforces each limit.
      if (kind === 'gvisor') expect(agentLog).toMatch(/runsc: runsc version \S+/);
      const limitsLine = /limits: .*/.exec(agentLog)?.[0] ?? '';
      for (const what of ['memory', 'processes', 'open files', 'file size', 'CPU time', '/tmp', 'disk writes']) expect(limitsLine).toContain(what);
      expect(agentLog).not.toMatch(/NO memory limit/);
      edge.send({ type: 'welcome', v: PROTOCOL_VERSION, team: 'attack', heartbeatMs: HEARTBEAT_MS });
      // Warm up (the pool's sandboxes are made with the limits of the latest job).
      const w = await job({ command: 'true' }, 60_000);
      expect(w.exit?.state, agentLog).toBe('exited');
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
      if (base) rmSync(base, { recursive: true, force: true });
      if (stateDir) rmSync(stateDir, { recursive: true, force: true });
      if (rows.length) {
        console.log(
          `\nattack suite, ${label}:\n| attack | outcome | time to contain |\n|---|---|---|\n${rows.map((r) => `| ${r.attack} | ${r.outcome} | ${(r.ms / 1000).toFixed(2)} s |`).join('\n')}\n`,
        );
      }
    });

    /** Sends a job, waits for its exit (or refusal), acknowledges it. */
    async function job(spec: Partial<JobSpec>, waitMs = 30_000): Promise<{ exit?: JobExit; error?: Msg; ms: number }> {
      const jobId = `atk-${kind}-${++n}`;
      const t0 = Date.now();
      edge.send({ type: 'job.start', spec: jobSpec({ jobId, limits: ATTACK_LIMITS, ...(o.reuse ? { reuse: o.reuse } : {}), ...spec }) });
      const m = await edge.next((x) => (x.type === 'job.exit' || x.type === 'job.error') && x.jobId === jobId, waitMs);
      const ms = Date.now() - t0;
      if (m.type === 'job.error') return { error: m, ms };
      edge.send({ type: 'job.ack', jobId });
      return { exit: m as unknown as JobExit, ms };
    }

    /** Runs an attack: within timeout + grace, then the agent must be healthy and clean. */
    async function attack(name: string, spec: Partial<JobSpec>, markers: string[] = []) {
      const since = Date.now();
      const timeoutMs = spec.timeoutMs ?? 5000;
      const r = await job({ timeoutMs, ...spec }, timeoutMs + GRACE_MS);
      expect(r.ms, `${name}: reported within timeout + grace`).toBeLessThan(timeoutMs + GRACE_MS);
      await healthy(name, since, markers);
      const e = r.exit;
      rows.push({
        attack: name,
        ms: r.ms,
        outcome: e
          ? `${e.state}${e.exitCode !== null ? ` ${e.exitCode}` : ''}${e.signal ? ` ${e.signal}` : ''}${e.error ? ` (${e.error.code})` : ''}`
          : `refused (${String(r.error?.code)})`,
      });
      return r;
    }

    /** `since`: from when heartbeats must not have stopped (the one before it counts too). */
    async function healthy(name: string, since: number, markers: string[]) {
      expect(agent.exitCode, `${name}: agent still running\n${agentLog}`).toBeNull();
      // No process of the job is left on the host.
      let left: string[] = [];
      for (let i = 0; i < 50; i++) {
        left = leftovers(markers);
        if (!left.length) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(left, `${name}: processes left on the host`).toEqual([]);
      // Heartbeats never stopped: the largest gap since the attack began (counting from the one before it).
      const times = edge.heartbeatTimes;
      const from = Math.max(0, times.findIndex((t) => t >= since) - 1);
      const window = [...times.slice(from), Date.now()];
      const gap = Math.max(...window.slice(1).map((t, i) => t - window[i]));
      expect(gap, `${name}: heartbeat gap`).toBeLessThan(MAX_HEARTBEAT_GAP_MS);
      // The next job runs, quickly.
      const t = await job({ command: 'true' }, 30_000);
      expect(t.exit?.state, `${name}: next job`).toBe('exited');
      expect(t.exit?.exitCode).toBe(0);
      expect(t.ms, `${name}: next \`true\` took ${t.ms} ms`).toBeLessThan(NEXT_JOB_MAX_MS);
    }

    /** Host processes whose command line carries one of `markers`; under gVisor also sandboxes beyond the warm one. */
    function leftovers(markers: string[]): string[] {
      const ps = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' }).split('\n');
      const hits = ps.filter((l) => markers.some((m) => l.includes(m)) && !l.includes('ps -eo'));
      if (kind === 'gvisor') {
        const sandboxes = ps.filter((l) => l.includes('runsc-sandbox') && l.includes(stateDir));
        // Only the warm pool may be left (it grows to twice --warm while jobs arrive fast), and with
        // reuse the agent's capacity of parked reusable sandboxes.
        if (sandboxes.length > 2 * WARM + (o.reuse ? 2 : 0)) hits.push(...sandboxes);
      }
      return hits;
    }

    it('fork bomb: bounded by the process limit, ends, leaves nothing', async () => {
      const r = await attack('fork bomb', { mode: 'shell', command: 'b() { b | b & }; b; sleep 3; echo after-bomb', timeoutMs: 4000 });
      expect(r.exit).toBeDefined();
      expect(['exited', 'timed_out', 'signaled']).toContain(r.exit!.state);
    }, 60_000);

    it('8 GiB allocation: killed at the memory limit, never completes', async () => {
      const code = 'chunks = []\nfor i in range(64):\n    chunks.append(b"x" * (128 << 20))\nprint("ALLOCATED 8 GiB")\n';
      const r = await attack('8 GiB allocation', { mode: 'code', runtime: 'python', command: '', code, timeoutMs: 10_000 });
      expect(r.exit!.stdout).not.toContain('ALLOCATED');
      expect(r.exit!.state === 'signaled' || (r.exit!.state === 'exited' && r.exit!.exitCode !== 0), JSON.stringify(r.exit)).toBe(true);
      if (kind === 'bwrap' && r.exit!.state === 'signaled') expect(r.exit!.error?.code).toBe('memory_limit');
    }, 60_000);

    it('CPU spin: stopped by the CPU-time limit, long before its timeout', async () => {
      // 1 CPU second; the wall-clock timeout is far away so only the CPU limit can end it (a loaded
      // machine gives the job a small share of a core, hence the long timeout).
      const r = await attack('CPU spin (1 CPU s limit)', {
        mode: 'shell',
        command: 'while :; do :; done',
        timeoutMs: 60_000,
        limits: { ...ATTACK_LIMITS, cpuSeconds: 1 },
      });
      expect(r.exit, JSON.stringify(r.exit)).toMatchObject({ state: 'signaled', timedOut: false });
      expect(['SIGXCPU', 'SIGKILL']).toContain(r.exit!.signal);
    }, 120_000);

    it('10 GiB file in /tmp: stops at the /tmp size', async () => {
      const r = await attack('10 GiB file in /tmp', {
        mode: 'shell',
        command: 'head -c 10737418240 /dev/zero > /tmp/big; echo "rc=$?"; stat -c %s /tmp/big',
        timeoutMs: 10_000,
      });
      const size = Number(r.exit!.stdout.trim().split('\n').at(-1));
      expect(size).toBeLessThanOrEqual(ATTACK_LIMITS.tmpBytes);
      expect(r.exit!.stdout).toMatch(/rc=[1-9]/);
    }, 60_000);

    it('10 GiB file in the workspace: stops at the file size limit', async () => {
      const r = await attack('10 GiB file in the workspace', {
        mode: 'shell',
        command: 'head -c 10737418240 /dev/zero > big.bin; echo "rc=$?"',
        timeoutMs: 10_000,
      });
      expect(r.exit!.stdout).toMatch(/rc=[1-9]/);
      expect(statSync(join(root, 'big.bin')).size).toBeLessThanOrEqual(ATTACK_LIMITS.maxFileBytes);
      rmSync(join(root, 'big.bin'), { force: true });
    }, 60_000);

    it('10 GiB in many files in the workspace: stopped at the disk-write limit', async () => {
      const r = await attack('10 GiB in many workspace files', {
        mode: 'shell',
        timeoutMs: 20_000,
        command: 'i=0; while [ $i -lt 200 ]; do i=$((i+1)); head -c 52428800 /dev/zero > many-$i.bin; done; echo wrote-all',
      });
      expect(r.exit!.stdout).not.toContain('wrote-all');
      expect(r.exit!.error?.code).toBe('disk_write_limit');
      const written = readdirSync(root)
        .filter((f) => f.startsWith('many-'))
        .reduce((s, f) => s + statSync(join(root, f)).size, 0);
      // The limit is checked a few times a second: a little more than the limit may land, never the 10 GiB.
      expect(written).toBeLessThan(ATTACK_LIMITS.diskWriteBytes + 512 * MiB);
      for (const f of readdirSync(root)) if (f.startsWith('many-')) rmSync(join(root, f), { force: true });
    }, 60_000);

    it('2 GiB to stdout: counted, capped in the artifact, the agent keeps up', async () => {
      const r = await attack('2 GiB to stdout', { command: 'head', args: ['-c', '2147483648', '/dev/zero'], timeoutMs: 8000 });
      expect(['exited', 'timed_out']).toContain(r.exit!.state);
      expect(r.exit!.streams.stdout.bytes).toBeGreaterThan(0);
      expect(r.exit!.streams.stdout.artifactTruncated).toBe(true);
      expect(r.exit!.stdoutTruncated).toBe(true);
    }, 60_000);

    it('setsid, nohup, double fork and `sleep &` left behind: all gone when the job ends', async () => {
      const r = await attack(
        'setsid / nohup / double fork / sleep &',
        {
          mode: 'shell',
          timeoutMs: 5000,
          command: `setsid sleep ${M}.7101 & nohup sleep ${M}.7102 >/dev/null 2>&1 & (sleep ${M}.7103 &) ; sleep ${M}.7104 & echo started`,
        },
        [`sleep ${M}.710`],
      );
      expect(r.exit).toMatchObject({ state: 'exited', exitCode: 0, stdout: 'started\n' });
    }, 60_000);

    it("status files as symlinks to /dev/kmsg and a host file, a FIFO, /dev/zero: the exit code is the job's", async () => {
      const code = [
        'import os',
        'd = os.path.dirname(os.path.abspath(__file__))',
        'plant = [(".gatehouse-exit-status", "/dev/kmsg"), (".gatehouse-build-status", "/proc/sys/kernel/pid_max"), (".gatehouse-status", "/dev/zero")]',
        'for name, target in plant:',
        '    p = os.path.join(d, name)',
        '    if os.path.lexists(p): os.remove(p)',
        '    os.symlink(target, p)',
        'os.mkfifo(os.path.join(d, ".gatehouse-exit-status.fifo"))',
        'print("planted")',
        'raise SystemExit(7)',
      ].join('\n');
      const r = await attack('status files → /dev/kmsg, host file, FIFO, /dev/zero', { mode: 'code', runtime: 'python', command: '', code, timeoutMs: 10_000 });
      expect(r.exit).toMatchObject({ state: 'exited', exitCode: 7, signal: null, stdout: 'planted\n', phase: 'run' });
    }, 60_000);

    it('forged values in status files: "0" then exit 7, "137" then exit 3 are reported as 7 and 3', async () => {
      const forge0 = await attack('forged exit status "0", exit 7', {
        mode: 'shell',
        timeoutMs: 5000,
        command: 'for d in /job .; do echo 0 > $d/.gatehouse-exit-status; done 2>/dev/null; echo out; exit 7',
      });
      expect(forge0.exit).toMatchObject({ state: 'exited', exitCode: 7, stdout: 'out\n' });
      const forge137 = await attack('forged exit status "137", exit 3', {
        mode: 'shell',
        timeoutMs: 5000,
        command: 'for d in /job .; do echo 137 > $d/.gatehouse-exit-status; done 2>/dev/null; exit 3',
      });
      expect(forge137.exit).toMatchObject({ state: 'exited', exitCode: 3, signal: null });
    }, 60_000);

    it('a run step forging the build status (file and status pipe) is still a successful run, not a compile error', async () => {
      const code = [
        '#include <stdio.h>',
        '#include <unistd.h>',
        'int main(void) {',
        '  FILE *f = fopen("/job/.gatehouse-build-status", "w"); if (f) { fputs("1\\n", f); fclose(f); }',
        '  if (write(3, "build 1\\n", 8) < 0) puts("no status pipe");',
        '  puts("ran"); return 0;',
        '}',
      ].join('\n');
      const r = await attack('forged build status', { mode: 'code', runtime: 'c', command: '', code, timeoutMs: 30_000 });
      expect(r.exit).toMatchObject({ state: 'exited', exitCode: 0, phase: 'run', stdout: 'no status pipe\nran\n' });
      expect(r.exit!.error).toBeUndefined();
    }, 90_000);

    it('1 MiB of argv: one huge argument fails cleanly; 1 MiB in many arguments runs', async () => {
      const one = await attack('1 MiB argument', { command: 'echo', args: ['x'.repeat(MiB)], timeoutMs: 5000 });
      expect(
        one.exit?.state === 'failed_to_start' || (one.exit?.state === 'exited' && one.exit.exitCode !== 0),
        JSON.stringify(one.exit ?? one.error).slice(0, 300),
      ).toBe(true);
      const many = await attack('1 MiB in 16 arguments', {
        command: 'printf',
        args: ['%s', ...Array.from({ length: 16 }, () => 'y'.repeat(64 * 1024))],
        timeoutMs: 5000,
      });
      expect(many.exit).toMatchObject({ state: 'exited', exitCode: 0 });
      expect(many.exit!.streams.stdout.bytes).toBe(MiB);
    }, 60_000);

    it('NUL in an argument is refused; invalid UTF-8 reaches the job as U+FFFD', async () => {
      const nul = await attack('NUL in args', { command: 'echo', args: ['a\0b'] });
      expect(nul.error).toMatchObject({ type: 'job.error', code: 'invalid_argument' });
      const bad = await attack('invalid UTF-8 in args', { command: 'echo', args: ['\ud800x'] });
      expect(bad.exit).toMatchObject({ state: 'exited', exitCode: 0, stdout: '\ufffdx\n' });
    }, 60_000);

    it('the agent token stays out of reach: env, /proc, ps, the workspace parent, .gatehouse/', async () => {
      const command = [
        'env',
        'cat /proc/self/environ /proc/1/environ',
        "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/environ; tr '\\0' ' ' < $p/cmdline; echo; done",
        'ps auxwwe',
        'ls -la .. ../.gatehouse',
        'cat ../agent.token ../.gatehouse/tokens.json',
        `cat ${base}/agent.token ${base}/.gatehouse/tokens.json`,
        'find / -xdev \\( -name agent.token -o -name tokens.json \\) 2>/dev/null | head',
        'grep -rs agent-token- /proc/[0-9]*/environ /etc /tmp /job 2>/dev/null | head',
        'echo searched',
      ].join('; ');
      const r = await attack('read the agent token (env, /proc, ps, parent, .gatehouse/)', {
        mode: 'shell',
        command,
        timeoutMs: 15_000,
        limits: { ...ATTACK_LIMITS, inlineBytes: 2 * MiB },
      });
      expect(r.exit!.stdout).toContain('searched');
      const seen = r.exit!.stdout + r.exit!.stderr + edge.uploads.map((u) => u.body.toString('latin1')).join('');
      expect(seen).not.toContain(token);
    }, 60_000);

    it("no host path in /proc (pid 1's command line and environment); only the workspace, /job and a sized /tmp are writable", async () => {
      const command = [
        "echo pid1: $(tr '\\0' ' ' </proc/1/cmdline) '|' $(tr '\\0' ' ' </proc/1/environ)",
        "for p in /proc/[0-9]*; do tr '\\0' ' ' <$p/cmdline; tr '\\0' ' ' <$p/environ; echo; done 2>/dev/null",
        'echo mounts:; cat /proc/self/mountinfo; echo end-mounts',
        'for d in / /etc /usr /var /dev /dev/shm /bin /opt /proc; do { echo x >$d/gh-probe; } 2>/dev/null && echo "wrote in $d"; mkdir $d/gh-dir 2>/dev/null && echo "made a dir in $d"; done',
        'for d in /var /home /root /srv; do mkdir $d 2>/dev/null && echo "made $d"; done',
        'echo x > gh-probe && echo workspace-writable; echo x > /job/gh-probe && echo job-writable',
        `head -c ${ATTACK_LIMITS.tmpBytes + MiB} /dev/zero > /tmp/fill; echo "tmp rc=$?"; stat -c 'tmp size=%s' /tmp/fill`,
      ].join('; ');
      const r = await attack('host paths in /proc; writes outside workspace, /job, /tmp', {
        mode: 'shell',
        command,
        timeoutMs: 15_000,
        limits: { ...ATTACK_LIMITS, inlineBytes: MiB },
      });
      const out = r.exit!.stdout;
      expect(r.exit!.stdout, r.exit!.stderr).toContain('job-writable');
      expect(out).toMatch(/^pid1: \S/m);
      // Everything but the mount table (bwrap's names the two bound host dirs: executor/README.md, "Known limits").
      const procText = out.replace(/mounts:\n[\s\S]*end-mounts\n/, '') + r.exit!.stderr;
      for (const hostPath of [base, root, stateDir]) expect(procText).not.toContain(hostPath);
      if (kind === 'gvisor') expect(out).not.toContain(stateDir);
      // (At a line's start: the job's own command line, printed above, holds these words too.)
      expect(out).not.toMatch(/^(?:wrote in|made)/m);
      expect(out).toContain('workspace-writable');
      expect(out).toMatch(/tmp rc=[1-9]/);
      expect(Number(/tmp size=(\d+)/.exec(out)?.[1])).toBeLessThanOrEqual(ATTACK_LIMITS.tmpBytes);
      expect(existsSync(join(root, 'gh-probe'))).toBe(true);
    }, 60_000);

    it('network to 127.0.0.1 from inside: refused, the gateway sees no connection', async () => {
      // A listener of its own on loopback: the edge's port also takes the agent's own uploads, which must not count.
      let connections = 0;
      const listener = createServer((sock) => {
        connections++;
        sock.destroy();
      });
      await new Promise<void>((r) => listener.listen(0, '127.0.0.1', () => r()));
      const port = (listener.address() as AddressInfo).port;
      try {
        const code = `import socket\ns = socket.socket()\ns.settimeout(3)\ntry:\n    s.connect(("127.0.0.1", ${port}))\n    print("CONNECTED")\nexcept OSError as e:\n    print("BLOCKED", e)\n`;
        const r = await attack('network to 127.0.0.1', { mode: 'code', runtime: 'python', command: '', code, timeoutMs: 10_000 });
        expect(r.exit!.stdout).toMatch(/^BLOCKED/);
        expect(connections).toBe(0);
      } finally {
        listener.close();
      }
    }, 60_000);

    // ---- sandbox reuse: what one job of the team leaves must never reach the next ----
    if (o.reuse) {
      /** gVisor gives each sandbox a random boot id: equal ids = the same (reused) sandbox. */
      const BOOT = 'cat /proc/sys/kernel/random/boot_id';
      const bootOf = (out: string) => /^[0-9a-f-]{36}$/m.exec(out)?.[0] ?? 'none';
      /** Runs `attacker`, then `probe` as the team's next job; both exits, and whether the probe ran in the attacker's sandbox. */
      async function afterAttack(name: string, attacker: Partial<JobSpec>, probe: Partial<JobSpec>) {
        const t0 = Date.now();
        const a = await job({ timeoutMs: 10_000, ...attacker }, 10_000 + GRACE_MS);
        const p = await job({ timeoutMs: 10_000, ...probe }, 10_000 + GRACE_MS);
        expect(a.exit, `${name}: attacker`).toBeDefined();
        expect(p.exit, `${name}: probe`).toBeDefined();
        const same = bootOf(a.exit!.stdout) === bootOf(p.exit!.stdout);
        rows.push({
          attack: `reuse: ${name}`,
          outcome: `next job saw nothing (${same ? 'sandbox cleaned and reused' : 'sandbox discarded'})`,
          ms: Date.now() - t0,
        });
        return { a: a.exit!, p: p.exit!, same };
      }

      it('reuse: background, setsid, nohup, double-forked and stopped processes are gone before the next job', async () => {
        const { a, p, same } = await afterAttack(
          'processes left behind',
          {
            mode: 'shell',
            // The stopped process stops itself in a session of its own: stopped in the job shell's own process group,
            // it made gVisor send that group SIGHUP at the next exit in it (Linux sends it only when a group *becomes*
            // orphaned), which now and then hung up the attacker's shell before its last line.
            command: `${BOOT}; setsid sleep 1000.8101 & nohup sleep 1000.8102 >/dev/null 2>&1 & (sleep 1000.8103 &); setsid sh -c 'kill -STOP $$; sleep 1000.8104' & s=$!; (sleep 1; echo late > /tmp/late-writer) & sleep 0.3; echo "stopped: $(grep ^State /proc/$s/status)"; echo started`,
          },
          {
            mode: 'shell',
            command: `${BOOT}; sleep 1.5; for p in /proc/[0-9]*; do echo "$p $(tr '\\0' ' ' < $p/cmdline)"; done; ls -A /tmp`,
          },
        );
        expect(a.stdout, 'the attacker ran to its last line').toContain('started');
        expect(a.stdout, 'it left a stopped process').toMatch(/stopped: State:\s+T/);
        expect(a).toMatchObject({ state: 'exited', exitCode: 0 });
        expect(p).toMatchObject({ state: 'exited', exitCode: 0 });
        expect(p.stdout).not.toContain('1000.81');
        expect(p.stdout).not.toContain('late-writer');
        // The init killed them and kept the sandbox: the wipe, not a discard, is what this checks.
        expect(same, 'the sandbox was reused').toBe(true);
      }, 60_000);

      it('reuse: files in /tmp and /job (hidden, nested, unreadable, FIFOs, sockets, symlinks) are gone', async () => {
        const { p, same } = await afterAttack(
          'files left in /tmp and /job',
          {
            mode: 'shell',
            command: `${BOOT}; for d in /tmp /job; do echo x > $d/.hidden; mkdir -p $d/a/b; echo y > $d/a/b/c; chmod 000 $d/a/b $d/a; mkfifo $d/fifo; ln -s /etc/passwd $d/link; python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('$d/sock')"; done; echo "EVIL=1" > /tmp/.profile; ls -A /tmp /job`,
          },
          { mode: 'shell', command: `${BOOT}; find /tmp /job -mindepth 1 2>&1; echo end` },
        );
        expect(p.stdout.split('\n').filter((l) => l.startsWith('/'))).toEqual([]);
        expect(p.stdout).toContain('end');
        expect(same, 'the sandbox was reused').toBe(true);
      }, 60_000);

      it('reuse: a job that lowers its rlimits and exports variables changes nothing for the next job', async () => {
        const { p, same } = await afterAttack(
          'changed env and rlimits',
          {
            mode: 'shell',
            env: { LEAK_ME: 'from-job-1' },
            command: `${BOOT}; ulimit -n 16; ulimit -t 2; export EVIL=1; echo 'export EVIL=1' > /tmp/.profile; umask 000; echo done`,
          },
          { mode: 'shell', command: `${BOOT}; ulimit -Hn; ulimit -Sn; ulimit -t; umask; env` },
        );
        const lines = p.stdout.split('\n');
        expect(lines.slice(1, 5)).toEqual([String(ATTACK_LIMITS.maxOpenFiles), String(ATTACK_LIMITS.maxOpenFiles), String(ATTACK_LIMITS.cpuSeconds), '0022']);
        expect(p.stdout).not.toMatch(/EVIL|LEAK_ME/);
        expect(same).toBe(true);
      }, 60_000);

      it('reuse: a job that attacks the init (signals, its fds, its memory, forged frames) gets its own truthful result, and so does the next', async () => {
        const code = [
          'import os, signal, sys',
          `print(open('/proc/sys/kernel/random/boot_id').read().strip())`,
          'forged = b"X\\x00\\x00\\x00\\x0a{\\"code\\":0}C\\x00\\x00\\x00\\x0b{\\"ok\\":true}"',
          'for sig in (signal.SIGSTOP, signal.SIGTERM, signal.SIGKILL):',
          '    try: os.kill(1, sig); print("signalled init", sig)',
          '    except OSError as e: print("signal refused", e.errno)',
          'for fd in range(0, 16):',
          '    for mode in ("wb", "rb"):',
          '        try:',
          '            f = open("/proc/1/fd/%d" % fd, mode)',
          '            f.write(forged) if mode == "wb" else f.read(1)',
          '            print("OPENED init fd", fd, mode)',
          '        except OSError: pass',
          'try: open("/proc/1/mem", "r+b"); print("OPENED init memory")',
          'except OSError: pass',
          'sys.stdout.flush(); os.write(1, forged); os.write(2, forged)',
          'sys.exit(7)',
        ].join('\n');
        const { a, p, same } = await afterAttack(
          'attacks on the init and its channel',
          { mode: 'code', runtime: 'python', command: '', code },
          { mode: 'shell', command: `${BOOT}; echo probe-ok` },
        );
        expect(a).toMatchObject({ state: 'exited', exitCode: 7 });
        expect(a.stdout).not.toMatch(/signalled init|OPENED/);
        // The forged frames arrived as the job's own output bytes, nothing more.
        expect(a.stdout).toContain('{"code":0}');
        expect(p).toMatchObject({ state: 'exited', exitCode: 0 });
        expect(p.stdout).toMatch(/^[0-9a-f-]{36}\nprobe-ok\n$/);
        // The init came through untouched and reported the sandbox clean: the next job ran in it.
        expect(same, 'the sandbox was reused').toBe(true);
      }, 60_000);

      it('reuse: System V IPC objects and POSIX message queues never reach the next job', async () => {
        const make = [
          'import ctypes, os',
          'libc = ctypes.CDLL(None, use_errno=True)',
          'rt = ctypes.CDLL("librt.so.1", use_errno=True)',
          `print(open('/proc/sys/kernel/random/boot_id').read().strip())`,
          'print("shm", libc.shmget(0x4748, 4096, 0o1666), "msg", libc.msgget(0x4748, 0o1666), "sem", libc.semget(0x4748, 1, 0o1666))',
          'print("mq", rt.mq_open(b"/gatehouse-leak", os.O_CREAT | os.O_RDWR, 0o666, None))',
        ].join('\n');
        const look = [
          'import ctypes, os',
          'libc = ctypes.CDLL(None, use_errno=True)',
          'rt = ctypes.CDLL("librt.so.1", use_errno=True)',
          `print(open('/proc/sys/kernel/random/boot_id').read().strip())`,
          'print("shm", libc.shmget(0x4748, 0, 0), "msg", libc.msgget(0x4748, 0), "sem", libc.semget(0x4748, 0, 0))',
          'print("mq", rt.mq_open(b"/gatehouse-leak", os.O_RDWR, 0, None))',
        ].join('\n');
        const { a, p } = await afterAttack(
          'System V IPC and POSIX message queues',
          { mode: 'code', runtime: 'python', command: '', code: make },
          { mode: 'code', runtime: 'python', command: '', code: look },
        );
        expect(a.stdout, 'the attacker created System V objects (else this proves nothing)').toMatch(/shm \d+ msg \d+ sem \d+/);
        expect(a.stdout, 'POSIX message queues are refused in a reused sandbox').toContain('mq -1');
        expect(p.stdout).toContain('shm -1 msg -1 sem -1');
        expect(p.stdout).toContain('mq -1');
      }, 60_000);
    }

    it('a blocked agent (SIGSTOP) still cannot keep a job past its deadline: the watchdog kills it', async () => {
      const tick = join(root, 'tick-stop');
      // The timeout counts from the job's arrival, sandbox start included: long enough that a loaded host still runs
      // the job's first line before it (else there is nothing to stop), short enough to keep the test quick.
      const timeoutMs = 4000;
      const watchdogMs = timeoutMs + 500 + 2000; // timeout + the agent's grace + the watchdog's margin, from the launch
      // For the kill itself on a loaded host: the watchdog runs `runsc kill` up to three times, 300 ms and 1 s apart
      // (executor/jobs/watchdog.ts, RETRY_MS), and each run can take over a second there (seen: 4.5 s in all).
      const slackMs = 6000;
      const jobId = `atk-${kind}-${++n}`;
      edge.send({
        type: 'job.start',
        spec: jobSpec({
          jobId,
          limits: ATTACK_LIMITS,
          mode: 'shell',
          timeoutMs,
          command: `while :; do date +%s > tick-stop; sleep 0.2; done # ${M}.7201`,
        }),
      });
      for (let i = 0; i < 400 && !existsSync(tick); i++) await new Promise((r) => setTimeout(r, 25));
      expect(existsSync(tick), 'the job started').toBe(true);
      // The watchdog was armed at the launch, before the job's first tick: its deadline is at most watchdogMs from here.
      const t0 = Date.now();
      process.kill(agent.pid!, 'SIGSTOP');
      let stoppedMs = 0; // when the job stopped ticking, from its first tick
      let continued = 0; // when the agent was let run again
      try {
        await new Promise((r) => setTimeout(r, watchdogMs + slackMs));
        const last = statSync(tick).mtimeMs;
        await new Promise((r) => setTimeout(r, 1500));
        stoppedMs = Math.round(last - t0);
        expect(statSync(tick).mtimeMs, `the job stopped ticking while the agent was stopped; agent log:\n${agentLog.slice(-3000)}`).toBe(last);
        expect(last - t0).toBeLessThan(watchdogMs + slackMs);
        if (kind === 'bwrap') expect(leftovers([`${M}.7201`])).toEqual([]);
      } finally {
        process.kill(agent.pid!, 'SIGCONT');
        continued = Date.now();
      }
      const m = await edge.next((x) => x.type === 'job.exit' && x.jobId === jobId, 30_000);
      edge.send({ type: 'job.ack', jobId });
      expect(m).toMatchObject({ state: 'timed_out', timedOut: true, exitCode: null });
      // The agent, running again, logs what its watchdog did meanwhile: it was the watchdog's kill, and it worked.
      const said = new RegExp(`job ${jobId}: the watchdog killed its sandbox at \\S+, ${watchdogMs} ms after the start.*exited 0 in \\d+ ms`);
      for (let i = 0; i < 100 && !said.test(agentLog); i++) await new Promise((r) => setTimeout(r, 50));
      expect(agentLog).toMatch(said);
      rows.push({
        attack: `agent blocked (SIGSTOP) during a job with a ${timeoutMs / 1000} s timeout`,
        outcome: 'timed_out (killed by the watchdog; time = job start to its last sign of life)',
        ms: stoppedMs,
      });
      rmSync(tick, { force: true });
      // Heartbeats resume once the agent runs again (they stopped only while we stopped it): counted from
      // the first one after SIGCONT — `healthy` counts the one before `since` too, so `since` is the second.
      // (From a moment after the exit instead, a loaded machine's late first heartbeat made the stop itself the gap.)
      const after = () => edge.heartbeatTimes.filter((t) => t > continued);
      for (let i = 0; i < 200 && after().length < 2; i++) await new Promise((r) => setTimeout(r, 50));
      expect(after().length, 'heartbeats resumed after SIGCONT').toBeGreaterThanOrEqual(2);
      await healthy('after SIGSTOP', after()[1], [`${M}.7201`]);
    }, 90_000);

    it('a killed agent (SIGKILL) leaves no sandbox running', async () => {
      const tick = join(root, 'tick-kill');
      edge.send({
        type: 'job.start',
        spec: jobSpec({
          jobId: `atk-${kind}-${++n}`,
          limits: ATTACK_LIMITS,
          mode: 'shell',
          timeoutMs: 60_000,
          command: `while :; do date +%s > tick-kill; sleep 0.2; done # ${M}.7301`,
        }),
      });
      for (let i = 0; i < 100 && !existsSync(tick); i++) await new Promise((r) => setTimeout(r, 50));
      expect(existsSync(tick), 'the job started').toBe(true);
      const t0 = Date.now();
      const gone = new Promise((r) => agent.once('exit', r));
      process.kill(agent.pid!, 'SIGKILL');
      await gone;
      let left: string[] = [];
      for (let i = 0; i < 100; i++) {
        await new Promise((r) => setTimeout(r, 100));
        left = [
          ...leftovers([`${M}.7301`]),
          ...execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' })
            .split('\n')
            .filter((l) => l.includes('runsc') && l.includes(stateDir)),
        ];
        if (!left.length) break;
      }
      const ms = Date.now() - t0;
      expect(left, 'nothing of the job or its sandbox left after the agent died').toEqual([]);
      const last = statSync(tick).mtimeMs;
      await new Promise((r) => setTimeout(r, 1000));
      expect(statSync(tick).mtimeMs).toBe(last);
      rows.push({ attack: 'agent killed (SIGKILL) during a job', outcome: 'sandbox gone', ms });
    }, 60_000);
  });
}
