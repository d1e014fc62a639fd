/**
 * Builds the MCP Apps job view (`ui://gatehouse/job-output.html`) into one self-contained document,
 * build/apps/job-viewer.html.txt, which the Worker imports as text (src/mcp/apps/job-viewer.ts): hosts load a single
 * document, so the view's script (src/mcp/apps/job-viewer-client/main.ts, TypeScript) is bundled by esbuild and put
 * inline where page.html names it. wrangler runs this before every `wrangler dev` and `wrangler deploy` (`[build]`);
 * the tests build the same text in memory (vitest.config.ts).
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { build } from 'esbuild';
import { writeIfChanged } from './write-if-changed.ts';

const ROOT = resolve(import.meta.dirname, '..');
const CLIENT = join(ROOT, 'src/mcp/apps/job-viewer-client');
/** What src/mcp/apps/job-viewer.ts imports. */
export const JOB_VIEWER_TEXT = join(ROOT, 'build/apps/job-viewer.html.txt');
/** The element of page.html that the bundled script replaces. */
const SCRIPT_TAG = '<script type="module" src="./main.ts"></script>';

/** The view's document as `resources/read` serves it: page.html with its script bundled inline. */
export async function buildJobViewer(): Promise<string> {
  const result = await build({
    entryPoints: [join(CLIENT, 'main.ts')],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2023',
    charset: 'utf8',
    legalComments: 'none',
    write: false,
    logLevel: 'warning',
  });
  const script = result.outputFiles[0].text;
  // Inline, the script's text must not end its own element.
  if (/<\/script/i.test(script)) throw new Error('the job viewer script contains "</script": it cannot be inlined');
  // Its comments are the source's (lint suppressions): the document is served without them.
  const page = readFileSync(join(CLIENT, 'page.html'), 'utf8').replace(/<!--[\s\S]*?-->\n?/g, '');
  if (!page.includes(SCRIPT_TAG)) throw new Error(`page.html has no ${SCRIPT_TAG}`);
  return page.replace(SCRIPT_TAG, () => `<script type="module">\n${script}</script>`);
}

if (process.argv[1] && resolve(process.argv[1]) === import.meta.filename) {
  const written = writeIfChanged(JOB_VIEWER_TEXT, await buildJobViewer());
  process.stderr.write(`job viewer in ${JOB_VIEWER_TEXT}: ${written ? 'written' : 'unchanged'}\n`);
}
