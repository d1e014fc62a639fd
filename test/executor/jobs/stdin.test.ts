/** An interactive job's stdin on the agent: each write once and in order, whatever the edge re-sends. */
import { describe, expect, it } from 'vitest';
import { PassThrough } from 'node:stream';
import { JobStdin } from '../../../executor/jobs/stdin.ts';

const input = (seq: number, text: string, eof?: boolean) => ({
  type: 'job.input' as const,
  jobId: 'j',
  seq,
  data: Buffer.from(text).toString('base64'),
  ...(eof ? { eof } : {}),
});

async function drain(p: PassThrough): Promise<string> {
  let s = '';
  for await (const c of p) s += c;
  return s;
}

describe('job stdin', () => {
  it('holds writes that come before the launch, writes a re-sent one once, refuses gaps, and closes with eof', async () => {
    const stdin = new JobStdin('j');
    expect(stdin.write(input(0, 'a\n')).ok).toBe(true);
    const pipe = new PassThrough();
    const read = drain(pipe);
    stdin.attach(pipe);
    expect(stdin.write(input(0, 'a\n'))).toMatchObject({ ok: true, seq: 0 });
    expect(stdin.write(input(2, 'c\n'))).toMatchObject({ ok: false, error: 'input 2 arrived before input 1' });
    expect(stdin.write(input(1, 'b\n', true)).ok).toBe(true);
    expect(stdin.write(input(2, 'c\n'))).toMatchObject({ ok: false, error: 'its stdin is closed (eof was sent)' });
    expect(await read).toBe('a\nb\n');
  });

  it('refuses writes after the job ended', () => {
    const stdin = new JobStdin('j');
    stdin.end();
    expect(stdin.write(input(0, 'x'))).toMatchObject({ ok: false, error: 'the job has ended' });
  });
});
