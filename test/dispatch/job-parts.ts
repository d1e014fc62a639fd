/**
 * A job's stores as the team's object wires them (src/dispatch/capabilities.ts), over one test host,
 * with `store`: their methods under one roof for tests that follow a job through all of them.
 */
import type { StreamName } from '../../src/contracts/agent-protocol.ts';
import type { SqlHost } from '../../src/dispatch/capability-host.ts';
import { JobRecords } from '../../src/dispatch/job-records.ts';
import { JobRows } from '../../src/dispatch/job-rows.ts';
import { JobTexts } from '../../src/dispatch/job-texts.ts';
import { LiveOutput } from '../../src/dispatch/live-output.ts';
import { StreamArtifacts } from '../../src/dispatch/stream-artifacts.ts';

/** `youngMs` 0 (the default here): live output is written as it comes, as for a job past its first second. */
/** `streams`: the stream states of an artifact uploads capability built over the rows (else their own). */
export function jobParts(host: SqlHost, o: { youngMs?: number; streams?: (rows: JobRows) => StreamArtifacts } = {}) {
  const rows = new JobRows(host);
  const texts = new JobTexts(host);
  const streams = o.streams?.(rows) ?? new StreamArtifacts(host, rows);
  const live: LiveOutput = new LiveOutput(host, (id) => records.liveNeeded(id), o.youngMs ?? 0);
  const records: JobRecords = new JobRecords(host, { rows, texts, live, streams });
  const store = {
    create: records.create.bind(records),
    get: rows.get.bind(rows),
    queued: rows.queued.bind(rows),
    running: rows.running.bind(rows),
    assign: rows.assign.bind(rows),
    requeue: rows.requeue.bind(rows),
    setOrphaned: rows.setOrphaned.bind(rows),
    clearOrphaned: rows.clearOrphaned.bind(rows),
    list: rows.list.bind(rows),
    oldestDayEnded: rows.oldestDayEnded.bind(rows),
    finish: records.finish.bind(records),
    result: records.result.bind(records),
    view: records.view.bind(records),
    spec: records.spec.bind(records),
    uploading: records.uploading.bind(records),
    prune: records.prune.bind(records),
    appendOutput: live.append.bind(live),
    readOutput: live.read.bind(live),
    relayed: live.relayed.bind(live),
    artifactRow: streams.row.bind(streams),
    beginUpload: streams.begin.bind(streams),
    reportArtifact: streams.report.bind(streams),
    hasUploading: streams.hasUploading.bind(streams),
    /** The edge stored the stream's body (artifact-uploads.ts `end`, then the wiring's `onStored`). */
    endUpload(id: string, stream: StreamName, bytes: number) {
      streams.complete(id, stream, bytes);
      records.streamStored(id);
    },
  };
  return { rows, texts, live, streams, records, store };
}

export type TestJobStore = ReturnType<typeof jobParts>['store'];
