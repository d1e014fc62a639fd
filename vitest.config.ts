import { defineConfig, type Plugin } from 'vitest/config';
import { bundleRunner, RUNNER_TEXT } from './scripts/build-isolate-runner.ts';
import { buildJobViewer, JOB_VIEWER_TEXT } from './scripts/build-job-viewer.ts';

/** The text modules the Worker imports from build/ (wrangler's `.txt` rule), each with the build that makes it. */
const BUILT_TEXTS: Record<string, () => Promise<string>> = {
  [RUNNER_TEXT]: bundleRunner,
  [JOB_VIEWER_TEXT]: buildJobViewer,
};

/**
 * The script isolate's runner (src/script/isolate.ts) and the MCP Apps job view (src/mcp/apps/job-viewer.ts) as the
 * Worker imports them, built from their sources on each run, so a test never reads a stale file under build/.
 */
const builtTexts: Plugin = {
  name: 'built-text-modules',
  enforce: 'pre',
  resolveId: (source) => Object.keys(BUILT_TEXTS).find((file) => source.endsWith(file.slice(file.lastIndexOf('/build/')))) ?? null,
  load: async (id) => (id in BUILT_TEXTS ? `export default ${JSON.stringify(await BUILT_TEXTS[id]())};` : null),
};

export default defineConfig({
  plugins: [builtTexts],
  test: {
    include: ['test/**/*.test.ts'],
    // The migrated local D1 every test gateway starts from (applied once per run).
    globalSetup: ['test/support/global-setup.ts'],
    // Whole-system tests start wrangler dev, agents and sandboxes: generous, never timing-based asserts.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: 2,
  },
});
