/**
 * `npm run build` (and `npm pack`, through prepack): bundles the admin CLI, the executor agent
 * and `agent doctor` into dist/ with esbuild, so the packed `gatehouse` package installs on a
 * build host without the repository and with one dependency only: `node`, the Node 22 the bundles
 * run on (no wrangler, no workerd). bin/gatehouse.mjs loads these bundles whenever the TypeScript
 * sources are absent, on that Node when the host's own is older.
 */
import { copyFileSync, existsSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import { SHIPPED_FILES } from '../executor/shipped-files.ts';

const ROOT = resolve(import.meta.dirname, '..');
// `--agent-only --outdir DIR`: `npm start` bundles the agent it runs into its own state dir, so a
// package build (`npm pack`) running at the same time never removes the files under it.
const { values: opts } = parseArgs({ options: { outdir: { type: 'string' }, 'agent-only': { type: 'boolean' } } });
const OUT = resolve(opts.outdir ?? join(ROOT, 'dist'));
const ENTRIES = { cli: 'cli/main.ts', agent: 'executor/main.ts', doctor: 'executor/doctor.ts' };
// The programs the agent runs outside its own process (executor/shipped-files.ts): a TypeScript one
// is bundled as an entry of its own, any other copied as it is; both land beside the agent's bundle.
const shipped = Object.values(SHIPPED_FILES);
const SHIPPED_ENTRIES = Object.fromEntries(
  shipped.filter((f) => f.source.endsWith('.ts')).map((f) => [f.bundled.replace(/\.mjs$/, ''), `executor/${f.source}`]),
);

rmSync(OUT, { recursive: true, force: true });
const result = await build({
  absWorkingDir: ROOT,
  entryPoints: { ...(opts['agent-only'] ? { agent: ENTRIES.agent } : ENTRIES), ...SHIPPED_ENTRIES },
  outdir: OUT,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node22',
  outExtension: { '.js': '.mjs' },
  // One flat directory: every bundled file finds the shipped ones beside itself (executor/shipped-files.ts).
  chunkNames: '[name]-[hash]',
  // CommonJS dependencies bundled into ESM still call require() for Node built-ins.
  banner: { js: "import { createRequire as __gatehouseRequire } from 'node:module'; const require = __gatehouseRequire(import.meta.url);" },
  define: {
    __GATEHOUSE_VERSION__: JSON.stringify((JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version),
    __GATEHOUSE_BUNDLE__: 'true',
  },
  legalComments: 'linked',
  logLevel: 'warning',
  metafile: true,
});
for (const f of shipped) if (!f.source.endsWith('.ts')) copyFileSync(join(ROOT, 'executor', f.source), join(OUT, f.bundled));
for (const f of shipped) if (!existsSync(join(OUT, f.bundled))) throw new Error(`the bundle lacks ${f.bundled} (executor/${f.source})`);
const bytes = Object.values(result.metafile.outputs).reduce((n, o) => n + o.bytes, 0);
process.stderr.write(`${OUT}: ${Object.keys(result.metafile.outputs).length} files, ${(bytes / 1024).toFixed(0)} KiB\n`);
