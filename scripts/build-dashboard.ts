/**
 * Builds the dashboard's browser files (src/dashboard/assets.ts names them) into build/static/, the Worker's static
 * assets (wrangler.toml `[assets]`): esbuild bundles the client's TypeScript modules (src/dashboard/client/main.ts
 * and what it imports) into one `main.js`; the stylesheet and the icon are copied as they are. wrangler runs this
 * before every `wrangler dev` and `wrangler deploy` (`[build]`), so `npm start`, the tests and a deploy serve the
 * client as it is in the tree, with no manual step.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { build } from 'esbuild';
import { writeIfChanged } from './write-if-changed.ts';
import { ASSETS_PATH, DASHBOARD_ASSETS, type DashboardAsset } from '../src/dashboard/assets.ts';

const ROOT = resolve(import.meta.dirname, '..');
const CLIENT = join(ROOT, 'src/dashboard/client');
/** wrangler.toml `[assets] directory`. */
export const STATIC_DIR = join(ROOT, 'build/static');

/** A client module bundled for the browser the way main.js is: one ES module, nothing left to fetch. */
export async function bundleClient(entry = 'main.ts'): Promise<string> {
  const result = await build({
    entryPoints: [join(CLIENT, entry)],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    // Debian's chromium and any current browser; the syntax stays as written.
    target: 'es2023',
    charset: 'utf8',
    legalComments: 'none',
    write: false,
    logLevel: 'warning',
  });
  return result.outputFiles[0].text;
}

async function contents(): Promise<Record<DashboardAsset, string>> {
  return {
    'main.js': await bundleClient(),
    'style.css': readFileSync(join(CLIENT, 'style.css'), 'utf8'),
    'favicon.svg': readFileSync(join(CLIENT, 'favicon.svg'), 'utf8'),
  };
}

if (process.argv[1] && resolve(process.argv[1]) === import.meta.filename) {
  const out = join(STATIC_DIR, ASSETS_PATH);
  const files = await contents();
  const written = DASHBOARD_ASSETS.filter((name) => writeIfChanged(join(out, name), files[name]));
  process.stderr.write(`dashboard assets in ${out}: ${written.length ? `wrote ${written.join(', ')}` : 'unchanged'}\n`);
}
