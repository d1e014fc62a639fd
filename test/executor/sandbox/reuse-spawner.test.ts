/**
 * The reuse init's compiled job start (executor/sandbox/gvisor-reuse/spawn.c): built by the agent with the
 * host's C compiler, and what it promises when the init calls it — run here on the host, outside any sandbox,
 * through the init's own Python code. Inside gVisor it is covered by test/executor/sandbox/gvisor-reuse.test.ts
 * and the attack suite.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildSpawner, PREBUILT_SPAWNER } from '../../../executor/sandbox/gvisor-reuse/spawner.ts';
import { shippedFile } from '../../../executor/shipped-files.ts';

const CI = process.env.CI === 'true';
const dir = () => mkdtempSync(join(tmpdir(), 'gh-spawner-'));

describe('building the compiled job start', () => {
  it.runIf(CI || existsSync('/usr/bin/cc'))('compiles spawn.c into a directory only the agent can write', async () => {
    const d = join(dir(), 'spawner');
    const r = await buildSpawner(d);
    expect(r.ok, JSON.stringify(r)).toBe(true);
    if (!r.ok) return;
    expect(statSync(r.value).size).toBeGreaterThan(0);
    expect(statSync(d).mode & 0o777).toBe(0o700);
  });

  it('says why when no compiler builds it and none is prebuilt (the init then uses posix_spawn)', async () => {
    const r = await buildSpawner(join(dir(), 'spawner'), { path: '/nonexistent' });
    expect(r).toMatchObject({ ok: false, error: { code: 'compile_error' } });
    if (!r.ok)
      expect(r.error.message).toMatch(
        /^no C compiler built the reuse init's job start \(cc: .*; gcc: .*; clang: .*\), and none is prebuilt \(.*reuse-spawn\.so\)$/,
      );
  });

  // The agent image has no compiler: its build stage compiles the start beside the bundle's copy of the source.
  it.runIf(CI || existsSync('/usr/bin/cc'))(
    'without a compiler, takes the prebuilt start only if it was built from the same source for this machine',
    async () => {
      const bundle = dir();
      const source = join(bundle, 'reuse-spawn.c');
      copyFileSync(shippedFile('reuseSpawn'), source);
      const so = join(bundle, PREBUILT_SPAWNER);
      const compiled = await buildSpawner(join(dir(), 'spawner'), { source });
      if (!compiled.ok) throw new Error(compiled.error.message);
      copyFileSync(compiled.value, so);
      writeFileSync(`${so}.sha256`, `${createHash('sha256').update(readFileSync(source)).digest('hex')}\n`);
      const noCompiler = { path: '/nonexistent', source };
      expect(await buildSpawner(join(dir(), 'spawner'), noCompiler)).toEqual({ ok: true, value: so });

      const elf = readFileSync(so);
      elf.writeUInt16LE(elf.readUInt16LE(18) === 62 ? 183 : 62, 18); // another architecture's
      writeFileSync(so, elf);
      const other = await buildSpawner(join(dir(), 'spawner'), noCompiler);
      expect(other.ok || other.error.message).toMatch(/is not a shared object for this machine/);

      writeFileSync(source, `${readFileSync(source, 'utf8')}\n/* changed */\n`);
      const stale = await buildSpawner(join(dir(), 'spawner'), noCompiler);
      expect(stale.ok || stale.error.message).toMatch(/was built from another source than/);
    },
  );
});

// Setting another user's ids needs root (as the init is inside its sandbox); CI runs as root.
const asRoot = process.getuid?.() === 0;
describe.runIf(CI || (asRoot && existsSync('/usr/bin/python3') && existsSync('/usr/bin/cc')))('the compiled job start, called as the init calls it', () => {
  it("starts the program as the job user in a new session with exactly its env, stdio and rlimits; refuses what C would cut; reports a failed exec's errno", async () => {
    const built = await buildSpawner(join(dir(), 'spawner'));
    if (!built.ok) throw new Error(built.error.message);
    const prog = String.raw`import importlib.util, os, resource, signal, sys
spec = importlib.util.spec_from_file_location('reuse_init', sys.argv[1])
init = importlib.util.module_from_spec(spec)
spec.loader.exec_module(init)
init.JOB_UID = init.JOB_GID = 65534
init.drop_privilege_for_jobs()
init.SPAWNER = init.load_spawner(sys.argv[2])
signal.signal(signal.SIGUSR1, signal.SIG_IGN)
init.RESETS = [signal.SIGUSR1]
LIMITS = {'nofile': 77, 'fsize': 1 << 20, 'cpu': 9, 'core': 0}
own = [resource.getrlimit(init.RL[n]) for n in LIMITS]
r, w = os.pipe()
null = os.open('/dev/null', os.O_RDONLY)
null_w = os.open('/dev/null', os.O_WRONLY)
fds = (null, w, null_w)
pid = init.compiled_spawn('/bin/sh', ['sh', '-c', 'echo "ids $(id -u) $(id -g) $(id -G)"; echo "session $(($$ == $(cut -d" " -f6 /proc/$$/stat)))"; echo "env $(env | grep -v ^PWD= | sort | tr "\n" " ")"; ls /proc/self/fd | tr "\n" " "; echo; echo "limits $(ulimit -Hn) $(ulimit -Sn) $(ulimit -t) $(ulimit -c) $(ulimit -f)"; sleep 5 & kill -USR1 $!; wait $!; echo "usr1 $?"'], {'FOO': 'bar baz', 'PATH': '/usr/bin:/bin'}, fds, LIMITS)
os.close(w)
out = b''
while True:
    b = os.read(r, 4096)
    if not b: break
    out += b
print(out.decode(), end='')
print('status', os.waitpid(pid, 0)[1])
print('own ids', os.getresuid(), os.getresgid(), 'own limits unchanged', own == [resource.getrlimit(init.RL[n]) for n in LIMITS])
for path in ('/nonexistent/x', '/etc/passwd'):
    try:
        init.compiled_spawn(path, ['x'], {}, (null, null_w, null_w), LIMITS)
        print('started', path)
    except OSError as e:
        print('errno', e.errno)
for argv, env in ((['a\0b'], {}), (['true'], {'A=B': 'c'}), (['true'], {'': 'c'})):
    try:
        init.compiled_spawn('/bin/true', argv, env, (null, null_w, null_w), LIMITS)
        print('started')
    except ValueError as e:
        print('refused:', e)
`;
    const out = execFileSync('/usr/bin/python3', ['-I', '-S', '-B', '-c', prog, shippedFile('reuseInit'), built.value], {
      encoding: 'utf8',
      env: { PATH: '/usr/bin:/bin', LEAK: 'from-the-init' },
    });
    expect(out).toBe(
      [
        'ids 65534 65534 65534',
        'session 1',
        'env FOO=bar baz PATH=/usr/bin:/bin ',
        '0 1 2 3 ',
        'limits 77 77 9 0 2048',
        'usr1 138',
        'status 0',
        'own ids (0, 0, 0) (0, 0, 0) own limits unchanged True',
        'errno 2',
        'errno 13',
        'refused: embedded null byte',
        'refused: illegal environment variable name',
        'refused: illegal environment variable name',
        '',
      ].join('\n'),
    );
  }, 30_000);
});
