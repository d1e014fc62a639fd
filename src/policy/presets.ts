/**
 * Three honest starting points for a team policy. Each says what it really allows: the
 * argument screens refuse the known ways to make an allowed tool run another program, but a
 * tool that runs code the workspace holds (make's recipes, interpreters running workspace
 * scripts, git's repository configuration) runs that code — inside the sandbox, which is then
 * the boundary.
 */
import { PolicyDocument } from '../contracts/policy.ts';
import { RUNTIME_NAMES } from '../contracts/runtimes.ts';
import { DEFAULT_POLICY, READ_TOOLS } from './default-policy.ts';
import { isInterpreter } from './screens/interpreters.ts';
import { NetworkPolicy } from '../contracts/network.ts';
import { presetHosts } from './network-presets.ts';

export const PRESET_NAMES = ['strict', 'standard', 'builds', 'open'] as const;
export type PresetName = (typeof PRESET_NAMES)[number];

/**
 * Under `strict`, what destroys work in the workspace waits for a person: a recursive `rm`
 * (recursive flag first, as tools and people write it) and the git commands that throw away
 * uncommitted work or rewrite what is shared.
 */
const STRICT_ASK_RULES = [
  {
    pattern: ['rm', '/-[A-Za-z]*[rR][A-Za-z]*|--recursive/'],
    decision: 'ask' as const,
    reason: "a recursive delete in the workspace needs a person's approval",
  },
  {
    pattern: ['git', ['clean', 'reset', 'push', 'rebase', 'filter-branch']],
    decision: 'ask' as const,
    reason: "this git command can discard or rewrite work; it needs a person's approval",
  },
];

const STRICT: PolicyDocument = PolicyDocument.parse({
  ...JSON.parse(JSON.stringify(DEFAULT_POLICY)),
  runtime: { enabled: false, allowedRuntimes: [] },
  executables: { allow: READ_TOOLS },
  shell: { enabled: false, allow: [] },
  // The agent switches off the repository's filters, drivers, aliases, hooks and helpers for git.
  git: { repositoryPrograms: 'disable' },
  // That switch lists the repository's configuration just before git runs: one job at a time, so
  // no other job of the team can rewrite .git/config in between.
  limits: { ...DEFAULT_POLICY.limits, maxConcurrentJobs: 1 },
  argumentRules: {},
  rules: STRICT_ASK_RULES,
  // Single-use: every job gets a fresh gVisor sandbox (no kernel instance shared between jobs).
  sandbox: { minimum: 'none' },
});

/** The package managers `builds` adds: each gets the package registries, nothing else does. */
export const PACKAGE_MANAGERS = ['npm', 'pnpm', 'yarn', 'pip', 'pip3', 'uv', 'cargo', 'go', 'mvn', 'gradle'];

/**
 * The hosts of the `package-registries` network preset, for downloads only: GET and HEAD. The proxy
 * enforces methods on plain HTTP; over HTTPS it sees the host alone (docs/network.md).
 */
const REGISTRY_READS: NetworkPolicy = NetworkPolicy.parse({
  mode: 'allowlist',
  allow: presetHosts('package-registries').map((host) => ({ host, methods: ['GET', 'HEAD'] })),
});

const BUILDS: PolicyDocument = PolicyDocument.parse({
  ...JSON.parse(JSON.stringify(DEFAULT_POLICY)),
  executables: { allow: [...new Set([...DEFAULT_POLICY.executables.allow, ...PACKAGE_MANAGERS])] },
  env: { allow: [...DEFAULT_POLICY.env.allow, 'NODE_ENV'] },
  // An install is minutes, not seconds; the agent's own ceiling (--max-timeout-ms) still applies.
  limits: { ...DEFAULT_POLICY.limits, defaultTimeoutMs: 120_000, maxTimeoutMs: 600_000 },
  // Only the package managers get a network: the rule's, so a refusal names rules[0].network.
  rules: [
    {
      pattern: [PACKAGE_MANAGERS],
      decision: 'allow',
      reason: 'package managers download from the public package registries (GET and HEAD only)',
      network: REGISTRY_READS,
    },
  ],
});

const OPEN_EXECUTABLES = [...new Set([...DEFAULT_POLICY.executables.allow, 'sh', 'bash', 'xz', 'zip', 'unzip', 'jq', 'npm', 'pip', 'cargo'])];

const OPEN: PolicyDocument = PolicyDocument.parse({
  ...JSON.parse(JSON.stringify(DEFAULT_POLICY)),
  runtime: { enabled: true, allowedRuntimes: [...RUNTIME_NAMES] },
  executables: { allow: OPEN_EXECUTABLES },
  shell: { enabled: true, allow: ['/[\\s\\S]*/'] },
  // Inline code and code on stdin for every allowed program the interpreter screens' table knows (kotlinc, dotnet, …).
  argumentRules: Object.fromEntries(OPEN_EXECUTABLES.filter(isInterpreter).map((i) => [i, { deny: [], allowInlineCode: true, prependArgs: [] }])),
  // A REPL fed through job_input is the same arbitrary code inside the sandbox as inline code.
  interactive: { enabled: true },
});

export interface Preset {
  name: PresetName;
  /** What it really allows, for the admin API and docs/policy.md. */
  summary: string;
  policy: PolicyDocument;
}

export const PRESETS: Record<PresetName, Preset> = {
  strict: {
    name: 'strict',
    summary:
      'Read and file tools plus git; no interpreters, no make, no compilers, no runtimes, no shell strings; one job at a time. ' +
      "git runs with the repository's programs switched off by the agent: filters (clean/smudge/process), diff and merge drivers, " +
      'textconv, diff.external, aliases, hooks, fsmonitor, pager, editor, ssh/askpass/credential/gpg programs, remote upload/receive-pack; ' +
      'no system or global git configuration, no bare repository found by walking up, no submodules. ' +
      'Still allowed: sed, cp, mv and tar may rewrite any workspace file, .git/ included; later strict git calls switch off the programs such files name. ' +
      'Asks a person first (rule decision "ask") for a recursive rm and for git clean/reset/push/rebase/filter-branch. ' +
      'Every job gets a fresh gVisor sandbox (single-use). Interactive input (job_input, tty) is off.',
    policy: STRICT,
  },
  standard: {
    name: 'standard',
    summary:
      'The default: read/build tools, git, make, compilers and 15 runtimes; no shell strings (simple commands like `ls -la` run as argv). ' +
      'Screens refuse inline code (-c/-e), code on stdin (an interpreter, REPL or kotlinc without a script) and options that run other programs, but interpreters and make on a writable workspace = arbitrary code inside the sandbox, ' +
      "and git runs the repository's hooks and config programs. " +
      "gVisor agents reuse a sandbox for up to 50 of the team's jobs or 5 minutes, cleaned between jobs (sandbox.reuse). " +
      'Interactive input (job_input, tty) is off: input written to a running job would be code on stdin the screens never saw.',
    policy: DEFAULT_POLICY,
  },
  builds: {
    name: 'builds',
    summary:
      'standard plus the package managers (npm, pnpm, yarn, pip, uv, cargo, go, mvn, gradle), which alone get a network: the package-registries hosts, GET and HEAD only ' +
      '(methods are checked on plain HTTP; over HTTPS the proxy sees the host only). Installs run install scripts (npm lifecycle scripts, setup.py, build.rs, ' +
      'go generate through a Makefile): code from the registry, running inside the sandbox with the registries as its only way out. Timeouts up to 10 minutes. ' +
      'Jobs trust the CAs the agent host trusts (docs/builds.md).',
    policy: BUILDS,
  },
  open: {
    name: 'open',
    summary:
      'Everything the sandbox offers: any shell string, all 16 runtimes, inline code for interpreters, sh/bash. Arbitrary code inside the sandbox by design; ' +
      'the sandbox (no network, resource limits, jail) is the only boundary. Sandbox reuse as in standard. ' +
      "Interactive input is on (interactive.enabled): job_input writes to a running job's stdin (a REPL, a prompt), tty runs it on a terminal; " +
      'at most 2 sessions, stopped after 10 minutes idle or 1 hour, each write audited by size and sha256.',
    policy: OPEN,
  },
};

export function isPresetName(s: string): s is PresetName {
  return (PRESET_NAMES as readonly string[]).includes(s);
}
