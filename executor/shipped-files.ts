/**
 * The programs the agent runs outside its own process, each a file of its own: the jobs'
 * watchdog (Node, on the host), the reuse init and the egress forwarder (Python, inside
 * sandboxes), and the init's job start (C, compiled by the agent where it can). Run from the sources, the agent finds each where it lies in executor/; the
 * package build (scripts/build-dist.ts) bundles or copies each into the bundle's directory under
 * its `bundled` name, beside the agent's own files.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Set by the package build (scripts/build-dist.ts); undefined when the agent runs from its sources. */
declare const __GATEHOUSE_BUNDLE__: boolean | undefined;

/** `source`: under executor/; `bundled`: its name in the bundle (a .ts source is bundled, anything else copied). */
export const SHIPPED_FILES = {
  watchdog: { source: 'jobs/watchdog-process.ts', bundled: 'watchdog-process.mjs' },
  reuseInit: { source: 'sandbox/gvisor-reuse/init.py', bundled: 'reuse-init.py' },
  reuseSpawn: { source: 'sandbox/gvisor-reuse/spawn.c', bundled: 'reuse-spawn.c' },
  egressForwarder: { source: 'egress/forwarder.py', bundled: 'egress-forwarder.py' },
} as const;

export type ShippedFile = keyof typeof SHIPPED_FILES;

/**
 * The host path of a shipped file. Throws when it is missing (an incomplete package): the
 * watchdog, the reuse init and the forwarder must never be silently absent.
 */
export function shippedFile(name: ShippedFile): string {
  const f = SHIPPED_FILES[name];
  // The bundle is one flat directory (no chunk subdirectory), so this module's URL is beside every bundled file.
  const bundled = typeof __GATEHOUSE_BUNDLE__ === 'boolean' && __GATEHOUSE_BUNDLE__;
  const path = fileURLToPath(new URL(bundled ? `./${f.bundled}` : `./${f.source}`, import.meta.url));
  if (!existsSync(path))
    throw new Error(`the agent's ${name} program is missing at ${path}: the agent's package is incomplete (scripts/build-dist.ts ships it)`);
  return path;
}
