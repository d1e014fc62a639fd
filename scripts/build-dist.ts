/**
 * `npm run build` (and `npm pack`, through prepack): bundles the admin CLI, the executor agent
 * and `agent doctor` into dist/ with esbuild, so the packed `gatehouse` package installs on a
 * build host without the repository and with one dependency only: `node`, the Node 22 the bundles
 * run on (no wrangler, no workerd). bin/gatehouse.mjs loads these bundles whenever the TypeScript
 * sources are absent, on that Node when the host's own is older.
 */
import { rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { build } from 'esbuild';

const ROOT = resolve(import.meta.dirname, '..');
const OUT = join(ROOT, 'dist');

rmSync(OUT, { recursive: true, force: true });
const result = await build({
  absWorkingDir: ROOT,
  entryPoints: { cli: 'cli/main.ts', agent: 'executor/main.ts', doctor: 'executor/doctor.ts' },
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
  legalComments: 'linked',
  logLevel: 'warning',
  metafile: true,
});
const bytes = Object.values(result.metafile.outputs).reduce((n, o) => n + o.bytes, 0);
process.stderr.write(`dist/: ${Object.keys(result.metafile.outputs).length} files, ${(bytes / 1024).toFixed(0)} KiB\n`);
