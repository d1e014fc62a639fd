/**
 * Whether the agent holds descriptors it inherited (executor/sandbox/exec-util.ts
 * `inheritsOpenDescriptors`): where it does, every `runsc run` starts in the closing bash; where it
 * does not, runsc starts directly. Here a real Node process answers for itself, started with only
 * 0-2, then with a pipe and a file open beyond them (as a service manager or a `200>>file` would),
 * low ones (Node marks those close-on-exec at start), and one closed before it starts. What a job sees when
 * the agent inherited descriptors is in test/attack/inherited-fds.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../../..');
const PROBE = `import { inheritsOpenDescriptors } from ${JSON.stringify(`${ROOT}/executor/sandbox/exec-util.ts`)};
process.stdout.write(String(inheritsOpenDescriptors()));`;

/** Runs `shell` in a bash that first closes whatever this test process was started with beyond 0-2. */
function answer(shell: string): string {
  const closeAll = 'for f in /proc/$$/fd/*; do f=${f##*/}; [ "$f" -gt 2 ] 2>/dev/null && exec {f}>&-; done\n';
  const r = spawnSync('/bin/bash', ['-c', closeAll + shell, 'probe', process.execPath, PROBE], { encoding: 'utf8', timeout: 30_000 });
  expect(r.stderr).toBe('');
  return r.stdout;
}

describe('descriptors the agent inherited', () => {
  it('none beyond 0-2: the agent says so', () => {
    expect(answer('exec "$1" --input-type=module -e "$2" </dev/null')).toBe('false');
  });

  it('a file or a pipe at a high number: the agent says it holds them', () => {
    expect(answer('exec "$1" --input-type=module -e "$2" </dev/null 200>>/dev/null')).toBe('true');
    expect(answer('exec 250< <(sleep 5); exec "$1" --input-type=module -e "$2" </dev/null')).toBe('true');
  });

  it('low ones Node marks close-on-exec itself at start: they reach no child, and are not counted', () => {
    expect(answer('exec "$1" --input-type=module -e "$2" </dev/null 7>/dev/null')).toBe('false');
    expect(answer('exec 5< <(sleep 5); exec "$1" --input-type=module -e "$2" </dev/null')).toBe('false');
    // Both together with a high one: the high one alone makes it true.
    expect(answer('exec "$1" --input-type=module -e "$2" </dev/null 7>/dev/null 200>/dev/null')).toBe('true');
  });

  it('one closed before the agent starts is not counted', () => {
    expect(answer('exec 9>/dev/null; exec 9>&-; exec "$1" --input-type=module -e "$2" </dev/null')).toBe('false');
  });
});
