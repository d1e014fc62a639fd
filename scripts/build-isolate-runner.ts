/**
 * Builds the main module of a script's isolate (src/script/isolate-runner.ts, TypeScript) into one ES module,
 * build/isolate/runner.txt, which the Worker imports as text (wrangler's default rule for `.txt`) and hands to the
 * Worker Loader (src/script/isolate.ts). wrangler runs this before every `wrangler dev` and `wrangler deploy`
 * (`[build]`); the tests build the same text in memory (vitest.config.ts).
 */
import { join, resolve } from 'node:path';
import { build } from 'esbuild';
import { writeIfChanged } from './write-if-changed.ts';

const ROOT = resolve(import.meta.dirname, '..');
/** What src/script/isolate.ts imports. */
export const RUNNER_TEXT = join(ROOT, 'build/isolate/runner.txt');

/** The runner as the isolate loads it: one ES module that imports only `cloudflare:workers`. */
export async function bundleRunner(): Promise<string> {
  const result = await build({
    entryPoints: [join(ROOT, 'src/script/isolate-runner.ts')],
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    target: 'es2023',
    external: ['cloudflare:workers'],
    charset: 'utf8',
    legalComments: 'none',
    write: false,
    logLevel: 'warning',
  });
  return result.outputFiles[0].text;
}

if (process.argv[1] && resolve(process.argv[1]) === import.meta.filename) {
  const changed = writeIfChanged(RUNNER_TEXT, await bundleRunner());
  process.stderr.write(`script isolate runner in ${RUNNER_TEXT}: ${changed ? 'written' : 'unchanged'}\n`);
}
