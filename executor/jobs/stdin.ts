/**
 * An interactive job's stdin (`job.input`, src/contracts/interactive.ts): writes applied once each and in order by
 * their sequence number, whatever the edge re-sends after a reconnect; held until the process is launched; closed by
 * `eof` or the job's end.
 */
import type { Writable } from 'node:stream';
import type { JobInput, JobInputAck } from '../../src/contracts/interactive.ts';

export class JobStdin {
  private readonly jobId: string;
  private next = 0;
  private closed = false;
  private ended = false;
  private sink: Writable | null = null;
  /** Writes that came before the process was launched, in order. */
  private readonly early: { data: Buffer; eof: boolean }[] = [];

  constructor(jobId: string) {
    this.jobId = jobId;
  }

  /** The launched process's stdin pipe: what came early goes first. */
  attach(w: Writable): void {
    if (this.ended) return;
    this.sink = w;
    w.on('error', () => {}); // the job may exit without reading
    for (const e of this.early.splice(0)) this.put(e.data, e.eof);
  }

  /** Applies one `job.input` and says how it went. */
  write(m: JobInput): JobInputAck {
    const answer = (ok: boolean, error?: string): JobInputAck => ({ type: 'job.input.ack', jobId: this.jobId, seq: m.seq, ok, ...(error ? { error } : {}) });
    // Written before (its ack was lost): acknowledged again, not written twice.
    if (m.seq < this.next) return answer(true);
    if (this.ended) return answer(false, 'the job has ended');
    if (m.seq > this.next) return answer(false, `input ${m.seq} arrived before input ${this.next}`);
    if (this.closed) return answer(false, 'its stdin is closed (eof was sent)');
    const data = Buffer.from(m.data, 'base64');
    this.next += 1;
    this.closed = m.eof === true;
    if (this.sink) this.put(data, this.closed);
    else this.early.push({ data, eof: this.closed });
    return answer(true);
  }

  /** The job ended: later writes are refused. */
  end(): void {
    this.ended = true;
    this.sink?.destroy();
    this.sink = null;
  }

  private put(data: Buffer, eof: boolean): void {
    const w = this.sink!;
    if (data.byteLength) w.write(data);
    if (eof) w.end();
  }
}
