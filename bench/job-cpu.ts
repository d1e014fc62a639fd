/**
 * CPU per job, per component, of one running `npm start` setup (bench/user-setup.ts), read from
 * /proc (bench/proc-cpu.ts) before and after a batch of jobs.
 */
import { cmdline, descendants, procSnapshot, type ProcStat } from './proc-cpu.ts';
import type { UserSetup } from './user-setup.ts';

export const COMPONENTS = ['client', 'gateway', 'devProxy', 'agent', 'sandbox'] as const;
type Component = (typeof COMPONENTS)[number];

/** What each component is, in the bench's table. */
export const COMPONENT_NAMES: Record<Component, string> = {
  client: 'MCP client (SDK 1.x, this process)',
  gateway: 'gateway (workerd: Worker, Durable Object, local D1/R2)',
  devProxy: "wrangler dev's proxy workerd and wrangler (local only)",
  agent: 'agent (Node, its own process)',
  sandbox: 'sandbox and job (runsc, gofer, sentry / bwrap / the job)',
};

/** Where a sandbox's live CPU goes, by process: the profile behind the sandbox figure. */
export const SANDBOX_PARTS = ['runsc', 'gofer', 'sentry', 'bwrap', 'other', 'ended'] as const;
type SandboxPart = (typeof SANDBOX_PARTS)[number];

interface CpuSample {
  at: Record<Component, number>;
  parts: Record<SandboxPart, number>;
  /** The sandboxes' sentries (runsc-sandbox) alive at the sample: one per sandbox. */
  sentries: Set<number>;
}

const partOfCmd = new Map<number, SandboxPart | null>();

/** The part a process belongs to by its command line; null (inherit its parent's) for runsc's nameless stubs. */
function ownPart(p: ProcStat): SandboxPart | null {
  if (partOfCmd.has(p.pid)) return partOfCmd.get(p.pid)!;
  const cmd = cmdline(p.pid);
  const part: SandboxPart | null = /runsc-gofer/.test(cmd)
    ? 'gofer'
    : /runsc-sandbox/.test(cmd)
      ? 'sentry'
      : /^(\S*\/)?runsc\b|gatehouse-runsc/.test(cmd)
        ? 'runsc'
        : /^(\S*\/)?bwrap\b/.test(cmd)
          ? 'bwrap'
          : cmd === ''
            ? null
            : 'other';
  partOfCmd.set(p.pid, part);
  return part;
}

/** CPU (ms) used so far by each component of `setup`. */
export function sampleCpu(setup: UserSetup): CpuSample {
  const snap = procSnapshot();
  const pids = setup.pids();
  const c = process.cpuUsage();
  const tree = (pid: number | null) => {
    const s = pid === null ? undefined : snap.get(pid);
    return s ? s.own + s.reaped : 0;
  };
  const agent = snap.get(pids.agent);
  const parts = Object.fromEntries(SANDBOX_PARTS.map((k) => [k, 0])) as Record<SandboxPart, number>;
  // What ended was reaped by the agent (runsc run, bwrap, the job): its whole tree's CPU is in the agent's cutime.
  parts.ended = agent?.reaped ?? 0;
  const partOf = new Map<number, SandboxPart>();
  const sentries = new Set<number>();
  for (const p of descendants(snap, pids.agent)) {
    if (p.pid === pids.agent) continue;
    const own = ownPart(p);
    const part = own ?? partOf.get(p.ppid) ?? 'other';
    partOf.set(p.pid, part);
    parts[part] += p.own + p.reaped;
    if (own === 'sentry') sentries.add(p.pid);
  }
  return {
    at: {
      client: (c.user + c.system) / 1000,
      gateway: tree(pids.gateway),
      devProxy: tree(pids.devProxy) + pids.wrangler.reduce((a, q) => a + (snap.get(q)?.own ?? 0), 0),
      agent: agent?.own ?? 0,
      sandbox: SANDBOX_PARTS.reduce((a, k) => a + parts[k], 0),
    },
    parts,
    sentries,
  };
}

export interface CpuPerJob {
  jobs: number;
  perJob: Record<Component, number>;
  parts: Record<SandboxPart, number>;
  /** Sandboxes started during the batches and still running at their end (a reused sandbox's replacement). */
  sandboxStarts: number;
}

/** Adds the CPU between two samples, divided by `jobs`, into `acc`. */
export function addCpu(acc: CpuPerJob | null, before: CpuSample, after: CpuSample, jobs: number): CpuPerJob {
  const out: CpuPerJob = acc ?? {
    jobs: 0,
    perJob: Object.fromEntries(COMPONENTS.map((k) => [k, 0])) as Record<Component, number>,
    parts: Object.fromEntries(SANDBOX_PARTS.map((k) => [k, 0])) as Record<SandboxPart, number>,
    sandboxStarts: 0,
  };
  const total = out.jobs + jobs;
  // Running per-job means, weighted by each batch's jobs.
  for (const k of COMPONENTS) out.perJob[k] = (out.perJob[k] * out.jobs + (after.at[k] - before.at[k])) / total;
  for (const k of SANDBOX_PARTS) out.parts[k] = (out.parts[k] * out.jobs + (after.parts[k] - before.parts[k])) / total;
  out.jobs = total;
  out.sandboxStarts += [...after.sentries].filter((pid) => !before.sentries.has(pid)).length;
  return out;
}
