/**
 * Policy presets offered by the dashboard's editor: the gateway's own presets (strict, standard,
 * builds, open — `src/policy/presets.ts`, also served by `GET /admin/v1/policy/presets`), so the editor and
 * the admin API can never disagree about what a preset allows.
 */
import type { PolicyDocument } from '../contracts/policy.ts';
import { PRESET_NAMES, PRESETS } from '../policy/presets.ts';

export interface PolicyPreset {
  name: string;
  title: string;
  description: string;
  policy: PolicyDocument;
}

const TITLES: Record<(typeof PRESET_NAMES)[number], string> = {
  strict: 'Strict (read and file tools, hardened git)',
  standard: 'Standard (the shipped default)',
  builds: 'Builds (standard + package managers with the registries)',
  open: 'Open (anything the sandbox allows)',
};

export const POLICY_PRESETS: PolicyPreset[] = PRESET_NAMES.map((name) => ({
  name,
  title: TITLES[name],
  description: PRESETS[name].summary,
  policy: PRESETS[name].policy,
}));
