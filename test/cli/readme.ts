/**
 * The README's command blocks, for the tests that run them as written: the fenced `sh` block
 * after `<!-- name: … -->`, as its command lines (comments and blank lines dropped, trailing
 * comments cut off).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../e2e/harness.ts';

export function readmeBlock(name: string): string[] {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const at = readme.indexOf(`<!-- ${name}:`);
  if (at < 0) throw new Error(`README has no <!-- ${name}: … --> block`);
  const block = /```sh\n([\s\S]*?)```/.exec(readme.slice(at))![1];
  return block.split('\n').map((l) => l.replace(/\s+#\s.*$/, '').trim()).filter((l) => l && !l.startsWith('#'));
}
