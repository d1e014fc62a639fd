/**
 * "Every documented command is run by a test": each `sh` block of README.md and docs/*.md carries
 * a marker naming the test that runs it as written (`<!-- name: run by test/….test.ts … -->`), and
 * that test reads the block by its name; a block no test can run says so and why
 * (`<!-- name: not run by a test (why) -->`). A new block without a marker, a marker whose test does
 * not read the block, or a name used twice fails here. The README stays page one (≤ 300 lines,
 * CONVENTIONS.md "Small, honest docs"), and every relative link in these files leads somewhere.
 */
import { describe, expect, it } from 'vitest';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ROOT } from '../e2e/harness.ts';
import { docFiles, readmeShellBlocks } from './readme.ts';

describe('README and docs command blocks', () => {
  const blocks = readmeShellBlocks();

  it('finds the blocks (the quick start, CLI, agent, approvals, deploy)', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(8);
    expect(blocks.filter((b) => b.file === 'README.md').map((b) => b.marker?.slice(5, 16))).toContain('quick-start');
  });

  it('each block is run by the test its marker names, which reads it by name, or says why no test can run it', () => {
    const problems: string[] = [];
    for (const b of blocks) {
      const where = `${b.file}:${b.line} (${b.first.slice(0, 50)})`;
      const m = b.marker && /^<!-- ([a-z0-9-]+): (run by (test\/\S+\.test\.ts)|not run by a test \(.+\))/.exec(b.marker);
      if (!m) {
        problems.push(`${where}: no "<!-- name: run by test/….test.ts -->" or "<!-- name: not run by a test (why) -->" marker above it`);
        continue;
      }
      const [, name, , file] = m;
      if (!file) continue;
      if (!existsSync(join(ROOT, file))) {
        problems.push(`${where}: ${file} does not exist`);
        continue;
      }
      if (!readFileSync(join(ROOT, file), 'utf8').includes(`readmeBlock('${name}')`)) problems.push(`${where}: ${file} never reads readmeBlock('${name}')`);
    }
    expect(problems).toEqual([]);
  });

  it('gives each block a name no other block of README.md or docs/*.md uses', () => {
    const names = blocks.map((b) => /^<!-- ([a-z0-9-]+):/.exec(b.marker ?? '')?.[1]).filter((n): n is string => !!n);
    expect(names.filter((n, i) => names.indexOf(n) !== i)).toEqual([]);
  });
});

describe('README and docs', () => {
  it('keeps the README to 300 lines', () => {
    expect(readFileSync(join(ROOT, 'README.md'), 'utf8').trimEnd().split('\n').length).toBeLessThanOrEqual(300);
  });

  it('starts every doc with its purpose and a link back to the README', () => {
    for (const file of docFiles().filter((f) => f !== 'README.md')) {
      const [title, , purpose] = readFileSync(join(ROOT, file), 'utf8').split('\n');
      expect(title, file).toMatch(/^# /);
      expect(purpose, file).toContain('](../README.md');
    }
  });

  it('links only to files and headings that exist', () => {
    const broken: string[] = [];
    for (const file of [...docFiles(), 'bench/RESULTS.md']) {
      const text = readFileSync(join(ROOT, file), 'utf8').replace(/```[\s\S]*?```/g, '');
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target)) continue;
        const [path, anchor] = target.split('#');
        const to = path ? join(dirname(file), path) : file;
        if (!existsSync(join(ROOT, to))) {
          broken.push(`${file}: ${target} (no ${to})`);
          continue;
        }
        if (anchor && to.endsWith('.md') && !headingSlugs(readFileSync(join(ROOT, to), 'utf8')).has(anchor))
          broken.push(`${file}: ${target} (no heading #${anchor} in ${to})`);
      }
    }
    expect(broken).toEqual([]);
  });
});

/** GitHub's anchors for a Markdown file's headings: lower case, punctuation dropped, spaces to hyphens. */
function headingSlugs(md: string): Set<string> {
  const slugs = new Set<string>();
  for (const [, heading] of md.replace(/```[\s\S]*?```/g, '').matchAll(/^#{1,6} (.+)$/gm)) {
    const base = heading
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .trim()
      .replace(/\s/g, '-');
    let slug = base;
    for (let n = 1; slugs.has(slug); n++) slug = `${base}-${n}`;
    slugs.add(slug);
  }
  return slugs;
}
