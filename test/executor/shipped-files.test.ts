/**
 * The programs the agent runs outside its own process are files of their own
 * (executor/shipped-files.ts): from the sources each lies where the table says, and the agent's
 * bundle (scripts/build-dist.ts, as `npm start` and `npm pack` build it) carries each beside the
 * agent's own files, where the bundled agent looks for them.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { SHIPPED_FILES, shippedFile, type ShippedFile } from '../../executor/shipped-files.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const names = Object.keys(SHIPPED_FILES) as ShippedFile[];
const work = mkdtempSync(join(tmpdir(), 'gatehouse-shipped-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('files the agent runs outside its own process', () => {
  it('each is found in the sources', () => {
    for (const n of names) expect(shippedFile(n), n).toBe(join(ROOT, 'executor', SHIPPED_FILES[n].source));
  });

  it.runIf(existsSync('/usr/bin/python3'))('the Python ones compile with the Python the sandboxes run', () => {
    const py = names.map(shippedFile).filter((f) => f.endsWith('.py'));
    expect(py.length).toBeGreaterThan(0);
    // compile() only: nothing runs, no bytecode is written.
    execFileSync('/usr/bin/python3', ['-I', '-S', '-B', '-c', 'import sys\nfor f in sys.argv[1:]: compile(open(f).read(), f, "exec")', ...py]);
  });

  it("the agent's bundle carries each beside agent.mjs in one flat directory, and its watchdog kills at the deadline", async () => {
    const out = join(work, 'bundle');
    const built = spawnSync(process.execPath, [join(ROOT, 'scripts/build-dist.ts'), '--agent-only', '--outdir', out], { encoding: 'utf8' });
    expect(built.status, built.stderr).toBe(0);
    for (const n of names) expect(existsSync(join(out, SHIPPED_FILES[n].bundled)), n).toBe(true);
    expect(readdirSync(out, { withFileTypes: true }).filter((e) => e.isDirectory())).toEqual([]);

    const marker = join(work, 'fired');
    const p = spawn(process.execPath, [join(out, SHIPPED_FILES.watchdog.bundled)], { stdio: ['pipe', 'pipe', 'inherit'] });
    let said = '';
    p.stdout.on('data', (d) => (said += d));
    p.stdin.write(`${JSON.stringify({ arm: 1, ms: 100, kill: ['/bin/sh', '-c', 'echo x > "$1"', 'sh', marker], env: { PATH: '/usr/bin:/bin' } })}\n`);
    for (let i = 0; i < 100 && !said.includes('\n'); i++) await new Promise((r) => setTimeout(r, 50));
    p.stdin.end();
    expect(JSON.parse(said.split('\n')[0])).toMatchObject({ fired: 1, code: 0, attempts: 1 });
    expect(existsSync(marker)).toBe(true);
  }, 60_000);
});
