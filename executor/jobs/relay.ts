/**
 * Live output to the edge, coalesced: chunks are gathered per stream and sent at most every
 * `intervalMs` as `job.output` events, so a chatty job makes a few messages a second, not
 * thousands. UTF-8 is decoded per stream so a character split across chunks stays whole.
 */
import { StringDecoder } from 'node:string_decoder';
import type { JobOutput, StreamName } from '../../src/contracts/agent-protocol.ts';
import { LIVE_MESSAGE_CHARS, splitText } from '../../src/contracts/limits.ts';

export class OutputRelay {
  private seq = 0;
  private readonly pending: Record<StreamName, string[]> = { stdout: [], stderr: [] };
  private readonly decoders: Record<StreamName, StringDecoder> = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
  private timer: NodeJS.Timeout | null = null;
  private readonly jobId: string;
  private readonly send: (m: JobOutput) => void;
  private readonly intervalMs: number;

  constructor(jobId: string, send: (m: JobOutput) => void, intervalMs = 75) {
    this.jobId = jobId;
    this.send = send;
    this.intervalMs = intervalMs;
  }

  push = (stream: StreamName, chunk: Buffer): void => {
    const s = this.decoders[stream].write(chunk);
    if (s) this.pending[stream].push(s);
    this.timer ??= setTimeout(() => this.flush(), this.intervalMs);
  };

  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    for (const stream of ['stdout', 'stderr'] as const) {
      const data = this.pending[stream].join('');
      this.pending[stream] = [];
      // A fast writer can gather megabytes between flushes: each message stays far below the platform's size limit.
      if (data) for (const piece of splitText(data, LIVE_MESSAGE_CHARS)) this.send({ type: 'job.output', jobId: this.jobId, stream, seq: this.seq++, data: piece });
    }
  }
}
