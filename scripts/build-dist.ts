/**
 * `npm run build` (and `npm pack`, through prepack): bundles the admin CLI, the executor agent
 * and `agent doctor` into dist/ with esbuild, so the packed `gatehouse` package installs on a
 * build host without the repository and with one dependency only: `node`, the Node 22 the bundles
 * run on (no wrangler, no workerd). bin/gatehouse.mjs loads these bundles whenever the TypeScript
 * sources are absent, on that Node when the host's own is older.
 */
import { readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';

const ROOT = resolve(import.meta.dirname, '..');
// `--agent-only --outdir DIR`: `npm start` bundles the agent it runs into its own state dir, so a
// package build (`npm pack`) running at the same time never removes the files under it.
const { values: opts } = parseArgs({ options: { outdir: { type: 'string' }, 'agent-only': { type: 'boolean' } } });
const OUT = resolve(opts.outdir ?? join(ROOT, 'dist'));
const ENTRIES = { cli: 'cli/main.ts', agent: 'executor/main.ts', doctor: 'executor/doctor.ts' };

rmSync(OUT, { recursive: true, force: true });
const result = await build({
  absWorkingDir: ROOT,
  entryPoints: opts['agent-only'] ? { agent: ENTRIES.agent } : ENTRIES,
  outdir: OUT,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node22',
  outExtension: { '.js': '.mjs' },
  chunkNames: 'chunks/[name]-[hash]',
  // CommonJS dependencies bundled into ESM still call require() for Node built-ins.
  banner: { js: "import { createRequire as __gatehouseRequire } from 'node:module'; const require = __gatehouseRequire(import.meta.url);" },
  define: { __GATEHOUSE_VERSION__: JSON.stringify((JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version) },
  legalComments: 'linked',
  logLevel: 'warning',
  metafile: true,
});
const bytes = Object.values(result.metafile.outputs).reduce((n, o) => n + o.bytes, 0);
process.stderr.write(`${OUT}: ${Object.keys(result.metafile.outputs).length} files, ${(bytes / 1024).toFixed(0)} KiB\n`);
