import { defineConfig, type Plugin } from 'vitest/config';
import { bundleRunner, RUNNER_TEXT } from './scripts/build-isolate-runner.ts';

/**
 * The script isolate's runner as the Worker imports it (a `.txt` module: src/script/isolate.ts), built from its
 * source on each run, so a test never reads a stale build/isolate/runner.txt.
 */
const isolateRunner: Plugin = {
  name: 'isolate-runner-text',
  enforce: 'pre',
  resolveId: (source) => (source.endsWith('build/isolate/runner.txt') ? RUNNER_TEXT : null),
  load: async (id) => (id === RUNNER_TEXT ? `export default ${JSON.stringify(await bundleRunner())};` : null),
};

export default defineConfig({
  plugins: [isolateRunner],
  test: {
    include: ['test/**/*.test.ts'],
    // Whole-system tests start wrangler dev, agents and sandboxes: generous, never timing-based asserts.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: 2,
  },
});
