/**
 * Test helpers: a real driver + runner over a temp workspace, and a JobSpec builder.
 * Tests drive the runner directly (no edge); spool files stay on disk for inspection.
 */
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll } from 'vitest';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { JobSpec, SandboxKind } from '../../src/contracts/agent-protocol.ts';
import { decodeOutputFrame, type OutputFrame } from '../../src/contracts/output-frame.ts';
import type { LiveSink } from '../../executor/jobs/relay.ts';
import type { SandboxReuse } from '../../src/contracts/sandbox-reuse.ts';
import { startDriver } from '../../executor/sandbox/index.ts';
import type { SandboxDriver } from '../../executor/sandbox/types.ts';
import { JobRunner } from '../../executor/jobs/runner.ts';
import type { JobResult } from '../../executor/jobs/job-exit.ts';
import { probeRuntimes, type RuntimeTable } from '../../executor/runtimes/probe.ts';
import { silentLogger } from '../../executor/log.ts';
import { composeTrustedCas, trustEnv } from '../../executor/sandbox/trusted-cas.ts';
import { WorkspaceStore } from '../../executor/workspaces/store.ts';

export function toolWorks(cmd: string, args: string[] = ['--version']): boolean {
  try {
    execFileSync(cmd, args, { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Skips only outside CI, saying so; under CI=true a missing tool fails the file. */
export function requireTool(kind: SandboxKind): boolean {
  if (kind === 'none') return true;
  const tool = kind === 'gvisor' ? 'runsc' : 'bwrap';
  const ok = toolWorks(tool);
  if (!ok && process.env.CI === 'true') throw new Error(`${tool} is required under CI=true`);
  if (!ok) console.warn(`skipping ${kind} tests: ${tool} is not installed (allowed outside CI only)`);
  return ok;
}

let runtimesCache: Promise<RuntimeTable> | null = null;
export const runtimes = () => (runtimesCache ??= probeRuntimes());

export interface Rig {
  kind: SandboxKind;
  root: string;
  stateDir: string;
  driver: SandboxDriver;
  runner: JobRunner;
  /** The per-task workspaces, when the rig was made with `workspaces`. */
  workspaces?: WorkspaceStore;
  /** Live output frames the runner sent, decoded. */
  outputs: OutputFrame[];
  run(spec: Partial<JobSpec>): Promise<JobResult>;
  close(): Promise<void>;
}

export interface RigOptions {
  capacity?: number;
  warm?: number;
  maxTimeoutMs?: number;
  maxArtifactBytes?: number;
  withoutRuntimes?: string[];
  reuse?: SandboxReuse;
  /** Give jobs the trusted CA bundle as the agent does (executor/main.ts), with these extra CA files. */
  extraCaFiles?: string[];
  /** Hold per-task workspaces under the state dir as the agent does, on this clock. */
  workspaces?: { now?: () => number };
  /** gVisor: false starts reused sandboxes' jobs with os.posix_spawn (DriverOptions.compiledStart). */
  compiledStart?: boolean;
}

/**
 * The rig of the enclosing `describe` (or file): made before its tests (`beforeAll`, 60 s), closed after them. The
 * object returned stands for that rig from then on (`rig.run(…)`, `rig.root`).
 */
export function suiteRig(kind: SandboxKind, o: RigOptions = {}): Rig {
  let rig: Rig | null = null;
  beforeAll(async () => {
    rig = await makeRig(kind, o);
  }, 60_000);
  afterAll(async () => {
    await rig?.close();
  });
  return new Proxy({} as Rig, {
    get(_, key) {
      if (!rig) throw new Error(`the ${kind} rig is made before the suite's tests (beforeAll), not when the suite is defined`);
      const v = rig[key as keyof Rig];
      return typeof v === 'function' ? v.bind(rig) : v;
    },
  });
}

export async function makeRig(kind: SandboxKind, o: RigOptions = {}): Promise<Rig> {
  const root = realpathSync(mkdtempSync(join(tmpdir(), `gh-ws-${kind}-`)));
  const stateDir = mkdtempSync(join(tmpdir(), `gh-state-${kind}-`));
  const cas = o.extraCaFiles ? composeTrustedCas({ stateDir, extraCaFiles: o.extraCaFiles }) : null;
  if (cas && !cas.ok) throw new Error(cas.error.message);
  const caBundle = cas?.ok ? cas.value.hostPath : undefined;
  const d = await startDriver(
    kind,
    { root, stateDir, warm: o.warm ?? 1, ...(caBundle ? { caBundle } : {}), ...(o.compiledStart === false ? { compiledStart: false } : {}) },
    silentLogger,
  );
  if (!d.ok) throw new Error(d.error.message);
  const driver = d.value;
  const outputs: OutputFrame[] = [];
  const live: LiveSink = {
    sendFrame(f) {
      const d = decodeOutputFrame(f);
      if (!d.ok) throw new Error(d.reason);
      outputs.push({ ...d.frame, data: Buffer.from(d.frame.data) });
      return true;
    },
    buffered: () => 0,
  };
  const all = await runtimes();
  // A table that pretends some toolchains are missing (every runtime is installed on CI machines).
  const without = new Set(o.withoutRuntimes ?? []);
  const table: RuntimeTable = without.size
    ? { list: all.list.filter((r) => !without.has(r.name)), byRuntime: new Map([...all.byRuntime].filter(([n]) => !without.has(n))) }
    : all;
  const workspaces = o.workspaces ? new WorkspaceStore(stateDir, o.workspaces.now) : undefined;
  const runner = new JobRunner({
    driver,
    runtimes: table,
    root,
    spoolDir: join(stateDir, 'spool'),
    capacity: o.capacity ?? 4,
    ceilings: { maxTimeoutMs: o.maxTimeoutMs ?? 120_000, maxArtifactBytes: o.maxArtifactBytes ?? 200 * 1024 * 1024 },
    upload: null,
    log: silentLogger,
    ...(caBundle ? { agentEnv: trustEnv(kind, caBundle) } : {}),
    ...(workspaces ? { workspaces } : {}),
  });
  let n = 0;
  return {
    kind,
    root,
    stateDir,
    driver,
    runner,
    ...(workspaces ? { workspaces } : {}),
    outputs,
    run(spec) {
      const r = runner.start(jobSpec({ jobId: `job-${++n}`, ...(o.reuse ? { reuse: o.reuse } : {}), ...spec }), live);
      if (!r.accepted) throw Object.assign(new Error(r.error.message), { jobError: r.error });
      return r.done;
    },
    async close() {
      await runner.shutdown();
      await driver.close();
      rmSync(root, { recursive: true, force: true });
      rmSync(stateDir, { recursive: true, force: true });
    },
  };
}

export function jobSpec(p: Partial<JobSpec> & { jobId: string }): JobSpec {
  return {
    artifactHandle: `art_${p.jobId}_0123456789`,
    mode: 'argv',
    command: 'true',
    args: [],
    cwd: '',
    env: {},
    timeoutMs: 30_000,
    limits: { inlineBytes: 40_000, artifactBytes: 10 * 1024 * 1024 },
    ...p,
  };
}
