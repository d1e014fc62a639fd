/**
 * scripts/install-system-deps.sh (what `.ci/run` runs on a fresh machine), its gVisor step in
 * isolation: with a stand-in `runsc` of a given version and a stand-in `apt-get` that records its
 * calls, on a PATH holding nothing else (so the host's own runsc cannot answer). apt's sources and
 * pins go to a temporary directory. Checks: trixie's runsc is taken when the installed one is
 * missing or older than 20240729, that one package only (everything else of trixie pinned to 1),
 * and nothing is touched when the installed runsc is current.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const SCRIPT = resolve(import.meta.dirname, '../../scripts/install-system-deps.sh');
/** The version line of the runsc trixie ships (what the stand-in apt-get "installs"). */
const TRIXIE = 'runsc version 0.0~20240729.0';

let dirs: string[] = [];
afterEach(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); dirs = []; });

function fakeRunsc(bin: string, versionLine: string) {
  writeFileSync(join(bin, 'runsc'), `#!/bin/bash\n[ "$1" = --version ] && printf '%s\\nspec: 1.2.0\\n' '${versionLine}'\n`);
  chmodSync(join(bin, 'runsc'), 0o755);
}

/** Runs the script with `installed` as runsc's version line (null: no runsc). */
function run(installed: string | null) {
  const work = mkdtempSync(join(tmpdir(), 'gh-install-deps-'));
  dirs.push(work);
  const bin = join(work, 'bin');
  const apt = join(work, 'apt');
  mkdirSync(bin);
  mkdirSync(join(apt, 'sources.list.d'), { recursive: true });
  mkdirSync(join(apt, 'preferences.d'), { recursive: true });
  // Only the tools the script uses besides apt-get and runsc.
  for (const tool of ['sed', 'sort', 'cat']) symlinkSync(`/usr/bin/${tool}`, join(bin, tool));
  const log = join(work, 'apt-get.log');
  writeFileSync(join(bin, 'apt-get'), [
    '#!/bin/bash',
    `echo "$*" >> '${log}'`,
    // Installing runsc puts trixie's build in place, as the real package would.
    `if [ "$1" = install ] && [[ " $* " == *" runsc "* ]]; then printf '%s\\n' '#!/bin/bash' "[ \\"\\$1\\" = --version ] && echo '${TRIXIE}'" > '${bin}/runsc'; /bin/chmod 755 '${bin}/runsc'; fi`,
  ].join('\n') + '\n');
  chmodSync(join(bin, 'apt-get'), 0o755);
  if (installed) fakeRunsc(bin, installed);
  const r = spawnSync('/bin/bash', [SCRIPT], { encoding: 'utf8', env: { PATH: bin, GATEHOUSE_APT_DIR: apt } });
  const calls = existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : [];
  const read = (p: string) => (existsSync(join(apt, p)) ? readFileSync(join(apt, p), 'utf8') : null);
  return { ...r, calls, runscInstalls: calls.filter((c) => c.startsWith('install') && / runsc( |$)/.test(c)), sources: read('sources.list.d/gatehouse-trixie.sources'), pins: read('preferences.d/gatehouse-trixie') };
}

describe('install-system-deps.sh: the runsc the sandbox needs', () => {
  it.each([
    ['no runsc at all', null],
    ["Debian bookworm's runsc 20221219 (fails ls -l and stat)", 'runsc version 0.0~20221219.0'],
    ['a gVisor release older than 20240729', 'runsc version release-20240101.0'],
  ])('%s: takes trixie\'s runsc, that one package only', (_name, installed) => {
    const r = run(installed);
    expect(r.status, r.stderr + r.stdout).toBe(0);
    expect(r.stdout).toContain('installing trixie\'s runsc');
    expect(r.runscInstalls).toEqual(['install -y -qq --no-install-recommends runsc']);
    // The source is trixie's main archive; every trixie package is pinned to 1 (never upgraded to), runsc alone to 990.
    expect(r.sources).toMatch(/^Suites: trixie$/m);
    expect(r.pins).toBe('Package: *\nPin: release n=trixie\nPin-Priority: 1\n\nPackage: runsc\nPin: release n=trixie\nPin-Priority: 990\n');
    // apt learns of trixie before installing from it.
    expect(r.calls.indexOf('update -qq')).toBeGreaterThanOrEqual(0);
    expect(r.calls.indexOf('update -qq')).toBeLessThan(r.calls.indexOf(r.runscInstalls[0]));
    expect(r.stdout.trim().split('\n').at(-1)).toBe(TRIXIE);
  });

  it.each([
    ["trixie's own build", 'runsc version 0.0~20240729.0'],
    ["a newer build from gVisor's release channel", 'runsc version release-20251110.0'],
  ])('%s: left as it is, no trixie source added', (_name, installed) => {
    const r = run(installed);
    expect(r.status, r.stderr + r.stdout).toBe(0);
    expect(r.runscInstalls).toEqual([]);
    expect(r.sources).toBeNull();
    expect(r.pins).toBeNull();
    expect(r.stdout.trim().split('\n').at(-1)).toBe(installed);
  });
});
