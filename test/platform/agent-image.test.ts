/**
 * The agent's container image (deploy/agent/Dockerfile), checked without a Docker engine (none runs on
 * these machines; CI builds it): the Dockerfile parses, everything it copies from the repository exists
 * and passes its .dockerignore, its Node is the one the package pins, its entry point ends in the
 * `gatehouse agent` the package ships, no secret is baked in, and it runs as a non-root user by default.
 * The entry point script itself runs here, with a stand-in `gatehouse` and a stand-in cgroup directory.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildSpawner, PREBUILT_SPAWNER } from '../../executor/sandbox/gvisor-reuse/spawner.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const DOCKERFILE = join(ROOT, 'deploy/agent/Dockerfile');
const IGNORE = join(ROOT, 'deploy/agent/Dockerfile.dockerignore');
const ENTRYPOINT = join(ROOT, 'deploy/agent/entrypoint.sh');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  bin: Record<string, string>;
  files: string[];
  dependencies: Record<string, string>;
};

interface Instruction {
  line: number;
  keyword: string;
  /** The rest of the instruction, continuation lines joined. */
  args: string;
}
interface Stage {
  from: string;
  name: string | null;
  body: Instruction[];
}

const KEYWORDS = new Set([
  'FROM',
  'RUN',
  'CMD',
  'LABEL',
  'EXPOSE',
  'ENV',
  'ADD',
  'COPY',
  'ENTRYPOINT',
  'VOLUME',
  'USER',
  'WORKDIR',
  'ARG',
  'ONBUILD',
  'STOPSIGNAL',
  'HEALTHCHECK',
  'SHELL',
]);

/** Dockerfile syntax as BuildKit reads it: comment lines dropped, `\` continues a line, one instruction per logical line. */
function parseDockerfile(text: string): Instruction[] {
  const out: Instruction[] = [];
  let pending: { line: number; text: string } | null = null;
  text.split('\n').forEach((raw, i) => {
    const trimmed = raw.trim();
    if (trimmed.startsWith('#')) return; // comments (and the syntax directive) may sit inside a continued instruction too
    if (!pending && trimmed === '') return;
    const cont = /\\\s*$/.test(raw);
    const piece = cont ? raw.replace(/\\\s*$/, '') : raw;
    pending = pending ? { line: pending.line, text: `${pending.text} ${piece.trim()}` } : { line: i + 1, text: piece.trim() };
    if (cont) return;
    const m = /^(\S+)\s*(.*)$/s.exec(pending.text);
    if (!m) throw new Error(`line ${pending.line}: cannot read "${pending.text}"`);
    const keyword = m[1].toUpperCase();
    if (!KEYWORDS.has(keyword)) throw new Error(`line ${pending.line}: unknown instruction ${m[1]}`);
    out.push({ line: pending.line, keyword, args: m[2].trim() });
    pending = null;
  });
  if (pending) throw new Error('the Dockerfile ends inside a continued line');
  return out;
}

/** `ARG`s before the first FROM, with their defaults, and `${NAME}` expanded in FROM lines. */
function stages(ins: Instruction[]): { args: Record<string, string>; stages: Stage[] } {
  const args: Record<string, string> = {};
  const out: Stage[] = [];
  for (const i of ins) {
    if (i.keyword === 'ARG' && out.length === 0) {
      const [name, ...value] = i.args.split('=');
      args[name] = value.join('=').replace(/\$\{(\w+)\}/g, (_, n: string) => args[n] ?? '');
    } else if (i.keyword === 'FROM') {
      const m = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(i.args);
      if (!m) throw new Error(`line ${i.line}: FROM ${i.args}`);
      out.push({ from: m[1].replace(/\$\{(\w+)\}/g, (_, n: string) => args[n] ?? `<unset ${n}>`), name: m[2] ?? null, body: [] });
    } else {
      if (out.length === 0) throw new Error(`line ${i.line}: ${i.keyword} before the first FROM`);
      out[out.length - 1].body.push(i);
    }
  }
  return { args, stages: out };
}

/** COPY's flags, sources and destination (shell form; the exec/JSON form is not used in this Dockerfile). */
function copyParts(i: Instruction): { flags: Record<string, string>; sources: string[]; dest: string } {
  const words = i.args.split(/\s+/);
  const flags: Record<string, string> = {};
  while (words[0]?.startsWith('--')) {
    const [k, v] = words.shift()!.slice(2).split('=');
    flags[k] = v ?? '';
  }
  const dest = words.pop()!;
  return { flags, sources: words, dest };
}

/** .dockerignore matching as Docker does it: patterns in order, the last one that matches decides, `!` re-includes. */
function ignored(path: string, patterns: string[]): boolean {
  let out = false;
  for (const p of patterns) {
    const negate = p.startsWith('!');
    const pat = (negate ? p.slice(1) : p).replace(/\/$/, '');
    const re = new RegExp(
      `^${pat
        .split('**')
        .map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*'))
        .join('.*')}(/.*)?$`,
    );
    if (re.test(path)) out = !negate;
  }
  return out;
}

const text = readFileSync(DOCKERFILE, 'utf8');
const parsed = parseDockerfile(text);
const { stages: all } = stages(parsed);
const final = all[all.length - 1];
const ignorePatterns = readFileSync(IGNORE, 'utf8')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith('#'));
const runs = (s: Stage) => s.body.filter((i) => i.keyword === 'RUN').map((i) => i.args);

describe('the agent image (deploy/agent/Dockerfile)', () => {
  it('parses: known instructions only, a build stage and a runtime stage, both on the Node the package pins', () => {
    expect(text.startsWith('# syntax=docker/dockerfile:1')).toBe(true);
    expect(all.map((s) => s.name)).toEqual(['build', null]);
    for (const s of all) expect(s.from).toBe(`node:${pkg.dependencies.node}-bookworm-slim`);
  });

  it('copies from the repository only files that exist and that its .dockerignore lets into the context', () => {
    const copies = all.flatMap((s) => s.body.filter((i) => i.keyword === 'COPY' || i.keyword === 'ADD'));
    expect(copies.filter((c) => c.keyword === 'ADD')).toEqual([]);
    const fromRepo = copies.map(copyParts).filter((c) => c.flags.from === undefined);
    expect(fromRepo.length).toBeGreaterThan(5);
    for (const c of fromRepo)
      for (const src of c.sources) {
        const rel = src.replace(/^\.\//, '').replace(/\/$/, '');
        expect(existsSync(join(ROOT, rel)), `COPY source ${src}`).toBe(true);
        expect(ignored(rel, ignorePatterns), `COPY source ${src} is excluded by Dockerfile.dockerignore`).toBe(false);
      }
    // What the build stage hands over is what its `npm pack` writes.
    const handed = copies.map(copyParts).filter((c) => c.flags.from !== undefined);
    expect(handed.map((c) => [c.flags.from, c.sources])).toEqual([['build', ['/out/']]]);
    expect(runs(all[0]).some((r) => /npm pack --ignore-scripts --pack-destination \/out\b/.test(r))).toBe(true);
    // The build runs the same bundler step as `npm pack`'s prepack.
    expect(runs(all[0]).some((r) => r.includes('node scripts/build-dist.ts'))).toBe(true);
    expect(readFileSync(join(ROOT, 'package.json'), 'utf8')).toContain('"prepack": "node scripts/build-dist.ts"');
  });

  it("the build stage's files are enough to bundle the agent and the CLI (its build step run on a copy of just those)", async () => {
    const work = mkdtempSync(join(tmpdir(), 'gh-image-build-'));
    try {
      for (const c of all[0].body.filter((i) => i.keyword === 'COPY').map(copyParts))
        for (const src of c.sources) {
          const into = c.dest.endsWith('/') ? join(work, c.dest, basename(src)) : join(work, c.dest);
          cpSync(join(ROOT, src), into, { recursive: true });
        }
      // What `npm ci` installs in the image; linked here instead of installed again.
      symlinkSync(join(ROOT, 'node_modules'), join(work, 'node_modules'));
      const r = spawnSync(process.execPath, ['scripts/build-dist.ts'], { cwd: work, encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(0);
      for (const f of ['agent.mjs', 'cli.mjs', 'doctor.mjs']) expect(existsSync(join(work, 'dist', f)), f).toBe(true);
      // The stage's commands that make the prebuilt job start, as written there; the agent (no compiler) takes it.
      if (process.env.CI === 'true' || existsSync('/usr/bin/cc')) {
        const steps = runs(all[0])
          .flatMap((x) => x.split('&&'))
          .map((x) => x.trim())
          .filter((x) => x.includes('reuse-spawn'));
        expect(steps).toHaveLength(2);
        for (const step of steps) {
          const c = spawnSync('sh', ['-c', step], { cwd: work, encoding: 'utf8' });
          expect(c.status, `${step}: ${c.stderr}`).toBe(0);
        }
        const taken = await buildSpawner(join(work, 'spawner'), { path: '/nonexistent', source: join(work, 'dist', 'reuse-spawn.c') });
        expect(taken).toEqual({ ok: true, value: join(work, 'dist', PREBUILT_SPAWNER) });
      }
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }, 60_000);

  it('keeps node_modules, local state and secrets out of the build context', () => {
    for (const p of [
      'node_modules/zod/package.json',
      '.wrangler/state/x',
      '.gatehouse/agent.token',
      '.dev.vars',
      'signing-key.json',
      'test/e2e/harness.ts',
      '.git/config',
    ])
      expect(ignored(p, ignorePatterns), p).toBe(true);
    for (const p of ['src/contracts/agent-protocol.ts', 'executor/main.ts', 'bin/gatehouse.mjs', 'deploy/agent/entrypoint.sh'])
      expect(ignored(p, ignorePatterns), p).toBe(false);
  });

  it("compiles the reuse init's job start in the build stage, beside the bundle's copy of its source with its sha256; no compiler in the runtime image", () => {
    const build = runs(all[0]).join('\n');
    expect(build).toMatch(/apt-get install .*\bgcc\b.*\blibc6-dev\b/);
    expect(build).toContain('cc -O2 -shared -fPIC -o dist/reuse-spawn.so dist/reuse-spawn.c');
    expect(build).toContain("sha256sum dist/reuse-spawn.c | cut -d' ' -f1 > dist/reuse-spawn.so.sha256");
    // Before `npm pack`, so the tarball carries both; the names are the ones the agent looks for.
    expect(build.indexOf('reuse-spawn.so.sha256')).toBeLessThan(build.indexOf('npm pack'));
    expect(readFileSync(join(ROOT, 'executor/shipped-files.ts'), 'utf8')).toContain("bundled: 'reuse-spawn.c'");
    expect(readFileSync(join(ROOT, 'executor/sandbox/gvisor-reuse/spawner.ts'), 'utf8')).toContain("PREBUILT_SPAWNER = 'reuse-spawn.so'");
    expect(runs(final).join('\n')).not.toMatch(/\bgcc\b|build-essential/);
  });

  it('installs runsc and bubblewrap with the repository script, and the agent from the packed tarball', () => {
    const r = runs(final).join('\n');
    expect(r).toContain('bash /tmp/install-system-deps.sh --sandbox-only');
    expect(readFileSync(join(ROOT, 'scripts/install-system-deps.sh'), 'utf8')).toContain('--sandbox-only)');
    expect(r).toMatch(/npm install -g .*\/tmp\/pkg\/gatehouse-\*\.tgz/);
    for (const p of ['python3-minimal', 'tini']) expect(r).toContain(p);
  });

  it('enters through tini and the entry script, which runs the `gatehouse agent` the package ships', () => {
    const entry = final.body.filter((i) => i.keyword === 'ENTRYPOINT');
    expect(entry).toHaveLength(1);
    const argv = JSON.parse(entry[0].args) as string[];
    expect(argv.slice(0, 2)).toEqual(['/usr/bin/tini', '--']);
    const script = argv[2];
    const copied = final.body
      .filter((i) => i.keyword === 'COPY')
      .map(copyParts)
      .find((c) => c.dest === script);
    expect(copied?.sources).toEqual(['deploy/agent/entrypoint.sh']);
    const lines = readFileSync(ENTRYPOINT, 'utf8').trim().split('\n');
    expect(lines[0]).toBe('#!/bin/sh');
    expect(lines[lines.length - 1]).toMatch(/^exec gatehouse agent .*"\$@"$/);
    expect(pkg.bin.gatehouse).toBe('bin/gatehouse.mjs');
    expect(pkg.files).toEqual(expect.arrayContaining(['bin/', 'dist/']));
    expect(readFileSync(join(ROOT, 'bin/gatehouse.mjs'), 'utf8')).toContain("'../dist/agent.mjs'");
    expect(statSync(ENTRYPOINT).mode & 0o111).not.toBe(0);
  });

  it('bakes in no secret: no token, key or password in ENV or ARG, nothing that looks like a JWT', () => {
    for (const i of parsed.filter((x) => x.keyword === 'ENV' || x.keyword === 'ARG')) {
      const name = i.args.split(/[=\s]/)[0];
      expect(name, `line ${i.line}`).not.toMatch(/TOKEN|KEY|SECRET|PASSWORD|CREDENTIAL/i);
    }
    expect(text).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}\./);
    // Every GATEHOUSE_* variable it sets is one the agent reads.
    const config = readFileSync(join(ROOT, 'executor/config.ts'), 'utf8');
    for (const i of final.body.filter((x) => x.keyword === 'ENV')) {
      const name = i.args.split(/[=\s]/)[0];
      if (name.startsWith('GATEHOUSE_')) expect(config, name).toContain(`env.${name}`);
    }
  });

  it('runs as a non-root user it creates; docs/agents.md says when and why to run it as root', () => {
    const users = final.body.filter((i) => i.keyword === 'USER').map((i) => i.args);
    expect(users.length).toBeGreaterThan(0);
    const user = users[users.length - 1];
    expect(['root', '0', '0:0']).not.toContain(user);
    expect(runs(final).some((r) => new RegExp(`useradd .*\\b${user}$`).test(r.split('&&')[0].trim()))).toBe(true);
    const docs = readFileSync(join(ROOT, 'docs/agents.md'), 'utf8');
    expect(docs).toContain('docker build -f deploy/agent/Dockerfile');
    expect(docs).toContain('--user 0');
  });
});

describe('the entry script (deploy/agent/entrypoint.sh), with a stand-in gatehouse', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gh-entry-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  // A stand-in for the installed `gatehouse`: prints the arguments it was given, one per line.
  const bin = join(dir, 'bin');
  mkdirSync(bin);
  writeFileSync(join(bin, 'gatehouse'), '#!/bin/sh\nfor a in "$@"; do echo "arg:$a"; done\n');
  chmodSync(join(bin, 'gatehouse'), 0o755);
  chmodSync(dir, 0o755);
  const run = (env: Record<string, string>, asUser?: number, agentArgs = ['--sandbox', 'bwrap', '--state-dir', '/elsewhere']) => {
    const argv = ['sh', ENTRYPOINT, ...agentArgs];
    const [file, args] =
      asUser === undefined ? [argv[0], argv.slice(1)] : ['setpriv', ['--reuid', String(asUser), '--regid', String(asUser), '--clear-groups', ...argv]];
    return spawnSync(file, args, { encoding: 'utf8', env: { PATH: `${bin}:/usr/bin:/bin`, ...env } });
  };
  const isRoot = process.getuid?.() === 0;

  it.skipIf(!isRoot)('as a non-root user it only becomes `gatehouse agent`, its default state dir first so a given one wins', () => {
    const r = run({ GATEHOUSE_CGROUP_ROOT: join(dir, 'none') }, 65534);
    expect(r.status).toBe(0);
    expect(r.stdout.trim().split('\n')).toEqual([
      'arg:agent',
      'arg:--state-dir',
      'arg:/var/lib/gatehouse/state',
      'arg:--sandbox',
      'arg:bwrap',
      'arg:--state-dir',
      'arg:/elsewhere',
    ]);
  });

  it.skipIf(!isRoot)('runs `gatehouse agent doctor` when the first argument is doctor', () => {
    const r = run({ GATEHOUSE_CGROUP_ROOT: join(dir, 'none') }, 65534, ['doctor', '--json']);
    expect(r.status).toBe(0);
    expect(r.stdout.trim().split('\n')).toEqual(['arg:agent', 'arg:doctor', 'arg:--json']);
  });

  it.skipIf(!isRoot)("as root in the host's cgroup namespace it moves nothing: that root and its processes are the host's", () => {
    const cg = join(dir, 'host-cgroup');
    mkdirSync(cg);
    writeFileSync(join(cg, 'cgroup.controllers'), 'memory pids\n');
    writeFileSync(join(cg, 'cgroup.procs'), '1\n');
    writeFileSync(join(dir, 'host-self-cgroup'), '0::/system.slice/docker-0123.scope\n');
    const r = run({ GATEHOUSE_CGROUP_ROOT: cg, GATEHOUSE_SELF_CGROUP: join(dir, 'host-self-cgroup') });
    expect(r.status).toBe(0);
    expect(existsSync(join(cg, 'agent'))).toBe(false);
    expect(r.stdout).toContain('arg:agent');
  });

  it.skipIf(!isRoot)('as root under cgroup v2 it moves its processes into a leaf; controllers it cannot enable are named, and the agent still starts', () => {
    // A stand-in hierarchy (a plain directory): cgroup.subtree_control is a directory, so enabling fails.
    const cg = join(dir, 'cgroup');
    mkdirSync(join(cg, 'cgroup.subtree_control'), { recursive: true });
    writeFileSync(join(cg, 'cgroup.controllers'), 'cpuset cpu io memory pids\n');
    writeFileSync(join(cg, 'cgroup.procs'), '4242\n');
    writeFileSync(join(dir, 'self-cgroup'), '0::/\n');
    const r = run({ GATEHOUSE_CGROUP_ROOT: cg, GATEHOUSE_SELF_CGROUP: join(dir, 'self-cgroup') });
    expect(r.status).toBe(0);
    expect(readFileSync(join(cg, 'agent/cgroup.procs'), 'utf8')).toBe('4242\n');
    expect(r.stderr).toContain('could not enable the cgroup controllers cpu io memory pids');
    expect(r.stdout).toContain('arg:agent');
  });
});
