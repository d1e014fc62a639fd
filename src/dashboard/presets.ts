/**
 * Policy presets offered by the dashboard's editor: whole documents an admin loads, reviews and
 * saves. Parsed with the policy schema when the Worker loads, so a preset can never be invalid.
 */
import { PolicyDocument } from '../contracts/policy.ts';
import { DEFAULT_POLICY } from '../policy/default-policy.ts';

export interface PolicyPreset {
  name: string;
  title: string;
  description: string;
  policy: PolicyDocument;
}

const READ_ONLY_TOOLS = ['true', 'echo', 'printf', 'cat', 'head', 'tail', 'wc', 'ls', 'pwd', 'date', 'grep', 'sort', 'uniq', 'cut', 'diff', 'stat', 'du', 'basename', 'dirname', 'realpath'];

export const POLICY_PRESETS: PolicyPreset[] = [
  {
    name: 'standard',
    title: 'Standard (the shipped default)',
    description: 'Common read and build tools and the runtimes; no shell strings; 30 s default and 120 s maximum timeout; 4 concurrent jobs.',
    policy: DEFAULT_POLICY,
  },
  {
    name: 'read-only',
    title: 'Read-only tools',
    description: 'Only tools that read the workspace (ls, cat, grep, diff, …); no runtimes, no shell strings, no tools that write or run other programs; 2 concurrent jobs.',
    policy: PolicyDocument.parse({
      ...DEFAULT_POLICY,
      runtime: { enabled: false, allowedRuntimes: [] },
      executables: { allow: READ_ONLY_TOOLS },
      shell: { enabled: false, allow: [] },
      limits: { ...DEFAULT_POLICY.limits, maxConcurrentJobs: 2 },
    }),
  },
  {
    name: 'locked',
    title: 'Locked (nothing runs)',
    description: 'Every execute and runtime_execute call is denied; dry runs and stored output still work. For an incident, or a team not yet set up.',
    policy: PolicyDocument.parse({
      ...DEFAULT_POLICY,
      execute: { enabled: false },
      runtime: { enabled: false, allowedRuntimes: [] },
      executables: { allow: [] },
      shell: { enabled: false, allow: [] },
    }),
  },
];
