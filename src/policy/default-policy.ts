/**
 * The policy every team gets until an admin sets one: safe (no shell strings, no network —
 * the sandbox has none — conservative limits) but useful (read/build tools, installed runtimes).
 * Tools that can run other programs (find, git, sed, awk, tar, make, sort, compilers,
 * interpreters) are listed because the engine's argument screens refuse those uses; note that
 * make, git hooks and the runtimes' code mode run workspace or caller code inside the sandbox.
 */
import { PolicyDocument } from '../contracts/policy.ts';
import { DEFAULT_RESOURCE_LIMITS } from '../contracts/resource-limits.ts';
import { DEFAULT_SANDBOX_REUSE } from '../contracts/sandbox-reuse.ts';

/** Read and file tools, and git: what every preset allows (`strict` allows only these, src/policy/presets.ts). */
export const READ_TOOLS = [
  'true',
  'false',
  'echo',
  'printf',
  'cat',
  'head',
  'tail',
  'wc',
  'ls',
  'pwd',
  'date',
  'sleep',
  'grep',
  'sort',
  'uniq',
  'cut',
  'tr',
  'diff',
  'find',
  'stat',
  'du',
  'mkdir',
  'touch',
  'cp',
  'mv',
  'rm',
  'sed',
  'awk',
  'tar',
  'gzip',
  'basename',
  'dirname',
  'realpath',
  'readlink',
  'which',
  'seq',
  'nl',
  'tac',
  'rev',
  'paste',
  'comm',
  'cmp',
  'od',
  'md5sum',
  'sha256sum',
  'uname',
  'git',
];

/** make, the compilers and the installed runtimes' executables: what the default adds to them. */
const BUILD_TOOLS = [
  'make',
  'node',
  'python3',
  'python',
  'perl',
  'ruby',
  'php',
  'Rscript',
  'elixir',
  'go',
  'java',
  'kotlinc',
  'rustc',
  'cc',
  'gcc',
  'c++',
  'g++',
  'dotnet',
  'tsx',
  'tsc',
  'mcs',
];

export const DEFAULT_POLICY: PolicyDocument = PolicyDocument.parse({
  version: 1,
  execute: { enabled: true },
  runtime: {
    enabled: true,
    allowedRuntimes: ['node', 'typescript', 'python', 'ruby', 'php', 'perl', 'r', 'elixir', 'go', 'java', 'kotlin', 'rust', 'c', 'cpp', 'csharp'],
  },
  executables: {
    allow: [...READ_TOOLS, ...BUILD_TOOLS],
  },
  shell: { enabled: false, allow: [] },
  // gVisor agents run consecutive jobs of the team in one sandbox, cleaned between jobs (docs/agents.md).
  sandbox: { minimum: 'none', reuse: DEFAULT_SANDBOX_REUSE },
  env: { allow: ['LANG', 'LC_ALL', 'TZ', 'CI', 'NO_COLOR'] },
  limits: {
    defaultTimeoutMs: 30_000,
    maxTimeoutMs: 120_000,
    overMax: 'clamp',
    inlineOutputBytes: 40_000,
    maxArtifactBytes: 100 * 1024 * 1024,
    maxConcurrentJobs: 4,
    queueWaitMs: 5_000,
    ...DEFAULT_RESOURCE_LIMITS,
  },
});
