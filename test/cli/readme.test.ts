/**
 * "Every README command is run by a test": each `sh` block of the README carries a marker naming
 * the test that runs it as written (`<!-- name: run by test/….test.ts … -->`), and that test reads
 * the block by its name; a block no test can run says so and why (`<!-- name: not run by a test (why) -->`).
 * A new block without a marker, or a marker whose test does not read the block, fails here.
 */
import { describe, expect, it } from 'vitest';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../e2e/harness.ts';
import { readmeShellBlocks } from './readme.ts';

describe('README command blocks', () => {
  const blocks = readmeShellBlocks();

  it('finds the blocks (the quick start, CLI, agent, approvals, deploy)', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(8);
  });

  it('each block is run by the test its marker names, which reads it by name, or says why no test can run it', () => {
    const problems: string[] = [];
    for (const b of blocks) {
      const where = `README.md:${b.line} (${b.first.slice(0, 50)})`;
      const m = b.marker && /^<!-- ([a-z0-9-]+): (run by (test\/\S+\.test\.ts)|not run by a test \(.+\))/.exec(b.marker);
      if (!m) { problems.push(`${where}: no "<!-- name: run by test/….test.ts -->" or "<!-- name: not run by a test (why) -->" marker above it`); continue; }
      const [, name, , file] = m;
      if (!file) continue;
      if (!existsSync(join(ROOT, file))) { problems.push(`${where}: ${file} does not exist`); continue; }
      if (!readFileSync(join(ROOT, file), 'utf8').includes(`readmeBlock('${name}')`)) problems.push(`${where}: ${file} never reads readmeBlock('${name}')`);
    }
    expect(problems).toEqual([]);
  });
});
