/**
 * The command blocks of the README and docs/*.md, for the tests that run them as written: the
 * fenced `sh` block after `<!-- name: … -->`, as its command lines (comments and blank lines
 * dropped, trailing comments cut off). A name is unique across all those files.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../e2e/harness.ts';

/** README.md, then every docs/*.md: the files whose `sh` blocks tests run (paths relative to the repository). */
export function docFiles(): string[] {
  const docs = existsSync(join(ROOT, 'docs'))
    ? readdirSync(join(ROOT, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .sort()
    : [];
  return ['README.md', ...docs.map((f) => `docs/${f}`)];
}

const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');

export function readmeBlock(name: string): string[] {
  const hits = docFiles().flatMap((file) => {
    const text = read(file);
    const at = text.indexOf(`<!-- ${name}:`);
    return at < 0 ? [] : [{ file, rest: text.slice(at) }];
  });
  if (hits.length === 0) throw new Error(`no <!-- ${name}: … --> block in ${docFiles().join(', ')}`);
  if (hits.length > 1) throw new Error(`the block name ${name} is used in ${hits.map((h) => h.file).join(' and ')}: names must be unique`);
  const block = /```sh\n([\s\S]*?)```/.exec(hits[0].rest)![1];
  return block
    .split('\n')
    .map((l) => l.replace(/\s+#\s.*$/, '').trim())
    .filter((l) => l && !l.startsWith('#'));
}

/** Every `sh` block of README.md and docs/*.md with the marker line right above it (null when it has none). */
export function readmeShellBlocks(): { file: string; line: number; marker: string | null; first: string }[] {
  const out: { file: string; line: number; marker: string | null; first: string }[] = [];
  for (const file of docFiles()) {
    const lines = read(file).split('\n');
    lines.forEach((l, i) => {
      if (l !== '```sh') return;
      const above = lines[i - 1] ?? '';
      out.push({ file, line: i + 1, marker: /^<!-- .* -->$/.test(above) ? above : null, first: lines[i + 1] ?? '' });
    });
  }
  return out;
}
