/**
 * scripts/install-system-deps.sh (what `.ci/run` runs on a fresh machine, and `npm start` with
 * --sandbox-only when no sandbox is installed). Its gVisor step in isolation: with a stand-in `runsc`
 * of a given version and a stand-in `apt-get` that records its calls, on a PATH holding nothing else
 * (so the host's own runsc cannot answer). apt's sources and pins go to a temporary directory, and
 * the machine's release comes from a stand-in os-release. Checks: trixie's runsc is taken when the
 * installed one is missing or older than 20240729, that one package only (everything else of trixie
 * pinned to 1), from the Debian archive the machine's own apt sources name; nothing is touched when
 * the installed runsc is current; a trixie machine installs runsc from its own sources. --sandbox-only
 * runs on a machine without bwrap, runsc or python3 (a private mount namespace, test/support/bare-machine.ts)
 * and asks apt for the sandbox packages only.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { BARE_MACHINE_SUPPORTED, bareMachineArgv, bareMachineDir } from '../support/bare-machine.ts';

const SCRIPT = resolve(import.meta.dirname, '../../scripts/install-system-deps.sh');
/** The version line of the runsc trixie ships (what the stand-in apt-get "installs"). */
const TRIXIE = 'runsc version 0.0~20240729.0';

let dirs: string[] = [];
afterEach(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs = [];
});

/** A made-up archive address (reserved .example names): the script only reads these, never fetches them. */
const url = (host: string, path = 'debian', scheme = 'http') => `${scheme}://${host}/${path}`;
/** One deb822 stanza. */
const stanza = (types: string, uri: string, suites: string, first = '') => `${first}Types: ${types}\nURIs: ${uri}\nSuites: ${suites}\nComponents: main\n`;
const MIRROR = url('mirror.internal.example');
const THIRD_PARTY = stanza('deb', url('third-party.example', 'node_20.x', 'https'), 'nodistro');
const debianAptDir = (uri: string) => ({ 'sources.list.d/debian.sources': debianSources(uri) });

function fakeRunsc(bin: string, versionLine: string) {
  writeFileSync(join(bin, 'runsc'), `#!/bin/bash\n[ "$1" = --version ] && printf '%s\\nspec: 1.2.0\\n' '${versionLine}'\n`);
  chmodSync(join(bin, 'runsc'), 0o755);
}

const BOOKWORM = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\n';
const TRIXIE_OS = 'PRETTY_NAME="Debian GNU/Linux 13 (trixie)"\nID=debian\nVERSION_ID="13"\nVERSION_CODENAME=trixie\n';
/** What a fresh Debian 12 image has in /etc/apt/sources.list.d/debian.sources, with its archive at `uri`. */
const debianSources = (uri: string) => `Types: deb
# ${url('snapshot.example', 'archive/debian/20250520T000000Z')}
URIs: ${uri}
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${uri}-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
`;

interface RunOptions {
  /** Files under the apt dir (e.g. `sources.list`, `sources.list.d/debian.sources`). */
  apt?: Record<string, string>;
  osRelease?: string;
}

/** Runs the script with `installed` as runsc's version line (null: no runsc). */
function run(installed: string | null, opts: RunOptions = {}) {
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
  writeFileSync(
    join(bin, 'apt-get'),
    [
      '#!/bin/bash',
      `echo "$*" >> '${log}'`,
      // Installing runsc puts trixie's build in place, as the real package would.
      `if [ "$1" = install ] && [[ " $* " == *" runsc "* ]]; then printf '%s\\n' '#!/bin/bash' "[ \\"\\$1\\" = --version ] && echo '${TRIXIE}'" > '${bin}/runsc'; /bin/chmod 755 '${bin}/runsc'; fi`,
    ].join('\n') + '\n',
  );
  chmodSync(join(bin, 'apt-get'), 0o755);
  if (installed) fakeRunsc(bin, installed);
  for (const [name, text] of Object.entries(opts.apt ?? debianAptDir(MIRROR))) writeFileSync(join(apt, name), text);
  const osRelease = join(work, 'os-release');
  writeFileSync(osRelease, opts.osRelease ?? BOOKWORM);
  const r = spawnSync('/bin/bash', [SCRIPT], { encoding: 'utf8', env: { PATH: bin, GATEHOUSE_APT_DIR: apt, GATEHOUSE_OS_RELEASE: osRelease } });
  const calls = existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : [];
  const read = (p: string) => (existsSync(join(apt, p)) ? readFileSync(join(apt, p), 'utf8') : null);
  return {
    ...r,
    calls,
    runscInstalls: calls.filter((c) => c.startsWith('install') && / runsc( |$)/.test(c)),
    sources: read('sources.list.d/gatehouse-trixie.sources'),
    pins: read('preferences.d/gatehouse-trixie'),
  };
}

describe('install-system-deps.sh: the runsc the sandbox needs', () => {
  it.each([
    ['no runsc at all', null],
    ["Debian bookworm's runsc 20221219 (fails ls -l and stat)", 'runsc version 0.0~20221219.0'],
    ['a gVisor release older than 20240729', 'runsc version release-20240101.0'],
  ])("%s: takes trixie's runsc, that one package only", (_name, installed) => {
    const r = run(installed);
    expect(r.status, r.stderr + r.stdout).toBe(0);
    expect(r.stdout).toContain("installing trixie's runsc");
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

describe("install-system-deps.sh: trixie comes from this machine's own Debian archive", () => {
  const NONE = null;

  it('takes the URI of the Debian archive in deb822 sources (a local mirror), skipping third-party, disabled and security entries', () => {
    const r = run(NONE, {
      apt: {
        // Read first (apt reads sources.list.d in name order) and not Debian archives.
        'sources.list.d/a-third-party.sources': THIRD_PARTY,
        'sources.list.d/b-disabled.sources': stanza('deb', url('unreachable.example'), 'bookworm', 'Enabled: no\n'),
        'sources.list.d/c-sources-only.sources': stanza('deb-src', url('src-only.example'), 'bookworm'),
        'sources.list.d/debian.sources': debianSources(MIRROR),
      },
    });
    expect(r.status, r.stderr + r.stdout).toBe(0);
    expect(r.sources).toBe(`${stanza('deb', MIRROR, 'trixie')}Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n`);
    expect(r.stdout).toContain(MIRROR);
    expect(r.runscInstalls).toEqual(['install -y -qq --no-install-recommends runsc']);
  });

  it('takes the URI from a one-line sources.list entry with options', () => {
    const r = run(NONE, {
      apt: {
        'sources.list':
          [
            `# deb ${url('commented.example')} bookworm main`,
            `deb-src ${url('src-only.example')} bookworm main`,
            `deb [arch=amd64 signed-by=/usr/share/keyrings/other.gpg] ${url('packages.example.com', 'apt', 'https')} cloud-sdk-bookworm main`,
            `deb [ signed-by=/usr/share/keyrings/debian-archive-keyring.gpg ] ${url('mirror.example.org', 'debian/', 'https')} bookworm main contrib`,
            `deb ${url('security-mirror.example', 'debian-security')} bookworm-security main`,
          ].join('\n') + '\n',
      },
    });
    expect(r.status, r.stderr + r.stdout).toBe(0);
    expect(r.sources).toContain(`URIs: ${url('mirror.example.org', 'debian', 'https')}\n`);
  });

  it('falls back to deb.debian.org only when no Debian archive is configured, and says so', () => {
    const r = run(NONE, {
      apt: { 'sources.list.d/a-third-party.sources': THIRD_PARTY },
    });
    expect(r.status, r.stderr + r.stdout).toBe(0);
    expect(r.sources).toMatch(/^URIs: http:\/\/deb\.debian\.org\/debian$/m);
    expect(r.stdout).toMatch(/no Debian archive in the apt sources .*; taking trixie from http:\/\/deb\.debian\.org\/debian/);
  });

  it('rewrites a trixie source written earlier for another host, and updates apt before installing', () => {
    const r = run(NONE, {
      apt: {
        'sources.list.d/debian.sources': debianSources(MIRROR),
        'sources.list.d/gatehouse-trixie.sources': `${stanza('deb', url('old-mirror.example'), 'trixie')}Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n`,
      },
    });
    expect(r.status, r.stderr + r.stdout).toBe(0);
    expect(r.sources).toContain(`URIs: ${MIRROR}\n`);
    expect(r.calls.indexOf('update -qq')).toBeGreaterThanOrEqual(0);
    expect(r.calls.indexOf('update -qq')).toBeLessThan(r.calls.indexOf(r.runscInstalls[0]));
  });

  it("on Debian 13 (trixie) installs runsc from the machine's own sources: no extra source, no pins", () => {
    const r = run(NONE, { osRelease: TRIXIE_OS });
    expect(r.status, r.stderr + r.stdout).toBe(0);
    expect(r.runscInstalls).toEqual(['install -y -qq --no-install-recommends runsc']);
    expect(r.sources).toBeNull();
    expect(r.pins).toBeNull();
    expect(r.stdout.trim().split('\n').at(-1)).toBe(TRIXIE);
  });
});

// A fresh machine: no bwrap, no runsc, and none of python3, cc, ruby that the full run would install.
const HIDE = ['bwrap', 'runsc', 'python3', 'cc', 'ruby'];
if (!BARE_MACHINE_SUPPORTED && process.env.CI === 'true') throw new Error('the --sandbox-only test needs root, unshare and overlayfs under CI=true');

describe('install-system-deps.sh --sandbox-only (what npm start runs when no sandbox is installed)', () => {
  function onBareMachine(args: string[]) {
    const dir = bareMachineDir();
    dirs.push(dir);
    const apt = join(dir, 'apt');
    mkdirSync(join(apt, 'sources.list.d'), { recursive: true });
    mkdirSync(join(apt, 'preferences.d'), { recursive: true });
    writeFileSync(join(apt, 'sources.list.d/debian.sources'), debianSources(MIRROR));
    writeFileSync(join(dir, 'os-release'), BOOKWORM);
    const aptLog = join(dir, 'apt-get.log');
    const [file, ...argv] = bareMachineArgv(dir, { hide: HIDE, aptLog }, ['/bin/bash', SCRIPT, ...args]);
    const r = spawnSync(file, argv, {
      encoding: 'utf8',
      env: { ...process.env, GATEHOUSE_APT_DIR: apt, GATEHOUSE_OS_RELEASE: join(dir, 'os-release') },
      timeout: 60_000,
    });
    const calls = existsSync(aptLog) ? readFileSync(aptLog, 'utf8').trim().split('\n') : [];
    return { ...r, calls };
  }

  it.skipIf(!BARE_MACHINE_SUPPORTED)('asks apt for bubblewrap and runsc only, and says what it does', () => {
    const r = onBareMachine(['--sandbox-only']);
    expect(r.status, r.stderr + r.stdout).toBe(0);
    expect(r.calls).toEqual(['update -qq', 'install -y -qq --no-install-recommends bubblewrap', 'update -qq', 'install -y -qq --no-install-recommends runsc']);
    expect(r.stdout).toContain('install-system-deps: installing bubblewrap');
    expect(r.stdout).toContain("installing trixie's runsc");
    expect(r.stdout.trim().split('\n').at(-1)).toMatch(/^runsc version /);
  });

  it.skipIf(!BARE_MACHINE_SUPPORTED)('without the flag the same machine gets the whole toolchain list (the bare machine hides what it claims to)', () => {
    const r = onBareMachine([]);
    expect(r.status, r.stderr + r.stdout).toBe(0);
    expect(r.calls[1].split(' ')).toEqual(expect.arrayContaining(['bubblewrap', 'python3', 'gcc', 'ruby']));
  });

  it('refuses an unknown option and names the one it takes', () => {
    // No PATH and a scratch apt dir: should the option be taken, nothing on this machine is touched.
    const r = spawnSync('/bin/bash', [SCRIPT, '--sandbox'], { encoding: 'utf8', env: { PATH: '/nonexistent', GATEHOUSE_APT_DIR: '/nonexistent' } });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('allowed: --sandbox-only');
  });
});
