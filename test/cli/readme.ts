/**
 * The README's command blocks, for the tests that run them as written: the fenced `sh` block
 * after `<!-- name: … -->`, as its command lines (comments and blank lines dropped, trailing
 * comments cut off).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../e2e/harness.ts';

const readme = () => readFileSync(join(ROOT, 'README.md'), 'utf8');

export function readmeBlock(name: string): string[] {
  const text = readme();
  const at = text.indexOf(`<!-- ${name}:`);
  if (at < 0) throw new Error(`README has no <!-- ${name}: … --> block`);
  const block = /```sh\n([\s\S]*?)```/.exec(text.slice(at))![1];
  return block.split('\n').map((l) => l.replace(/\s+#\s.*$/, '').trim()).filter((l) => l && !l.startsWith('#'));
}

/** Every `sh` block of the README with the marker line right above it (null when it has none). */
export function readmeShellBlocks(): { line: number; marker: string | null; first: string }[] {
  const lines = readme().split('\n');
  const out: { line: number; marker: string | null; first: string }[] = [];
  lines.forEach((l, i) => {
    if (l !== '```sh') return;
    const above = lines[i - 1] ?? '';
    out.push({ line: i + 1, marker: /^<!-- .* -->$/.test(above) ? above : null, first: lines[i + 1] ?? '' });
  });
  return out;
}
