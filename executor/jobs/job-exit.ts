/**
 * A job's exit report: how its process ended, its inline output and which streams still go up as
 * artifacts, made into the JobExit the edge gets as soon as the process ended; the uploads follow
 * and report on their own. Also the exits of jobs that never ran.
 */
import { rmSync } from 'node:fs';
import type { JobArtifact, JobExit, JobSpec, StreamName, TerminalState, UploadGrant } from '../../src/contracts/agent-protocol.ts';
import { inlineResult } from '../../src/contracts/inline-result.ts';
import { LIVE_OUTPUT_MAX_BYTES } from '../../src/contracts/limits.ts';
import { JOB_NOTICES_MAX } from '../../src/contracts/agent-protocol.ts';
import type { Logger } from '../log.ts';
import type { ProcessEnd } from '../sandbox/types.ts';
import type { StreamCapture } from './capture.ts';
import type { OutputRelay } from './relay.ts';
import { uploadStreams, type UploadTarget } from './upload.ts';
import { inlineHoldsWhole } from './whole-inline.ts';

export interface JobResult {
  /** Known when the process ends; `pendingArtifacts` names the uploads still running. */
  exit: JobExit;
  /** Spool files still on disk (when there is no upload target). */
  spool: Record<StreamName, string> | null;
  /** One report per stream in `exit.pendingArtifacts`, once its upload ended. */
  artifacts: Promise<JobArtifact[]>;
  /**
   * The relay handed the live sink every byte the exit's inline result was made from (the first
   * min(bytes, inlineBytes) of each stream, within what the edge keeps live): the edge can rebuild
   * the result from its live copy if those frames all went on the socket the exit goes on.
   */
  inlineRelayed: boolean;
}

/** How the job ended, as the runner saw it. */
export interface JobEnding {
  end: ProcessEnd;
  /** The agent stopped it (its timeout, or a cancel); null when it ended by itself. */
  stop: 'timeout' | 'cancel' | null;
  /** Code mode: the step it ended in. */
  phase: 'build' | 'run' | undefined;
  /** The build step failed by itself: its stderr is the error. */
  compileError: boolean;
  /** A limit the agent enforces (disk writes, memory) stopped it. */
  limitError?: { code: string; message: string };
  /** What the agent noted about the job (its timeout lowered, connections refused): said in the result. */
  notices?: string[];
}

/** Where the job's spooled streams go; null keeps the spool files (tests, or an agent without an edge). */
export interface ArtifactUpload {
  target: UploadTarget;
  /** The job's upload grant from its `job.start`. */
  grant?: UploadGrant;
  log: Logger;
}

/** The job's result once its process ended: the exit now, the artifact uploads started behind it. */
export async function finishJob(
  spec: JobSpec,
  t0: number,
  ending: JobEnding,
  caps: Record<StreamName, StreamCapture>,
  relay: OutputRelay,
  upload: ArtifactUpload | null,
): Promise<JobResult> {
  const { end, stop, phase, compileError, limitError, notices } = ending;
  // The live copy goes out before the exit: the edge takes live output only while the job runs.
  await relay.finish();
  await caps.stdout.close();
  await caps.stderr.close();
  const durationMs = Math.round(performance.now() - t0);
  const inline = inlineResult(
    { head: caps.stdout.head(), total: caps.stdout.bytes },
    { head: caps.stderr.head(), total: caps.stderr.bytes },
    spec.limits.inlineBytes,
  );
  const relayedHead = (c: StreamCapture) => {
    const need = Math.min(c.bytes, spec.limits.inlineBytes);
    return need <= LIVE_OUTPUT_MAX_BYTES && relay.sent(c.stream) >= need;
  };
  const inlineRelayed = relayedHead(caps.stdout) && relayedHead(caps.stderr);
  let state: TerminalState;
  let exitCode: number | null = null;
  let signal: string | null = null;
  let error: JobExit['error'];
  if (end.kind === 'spawn_failed') {
    return settled({ ...failedToStart(spec.jobId, t0, end.message), phase });
  }
  if (end.kind === 'signaled') signal = end.signal;
  if (stop === 'timeout') state = 'timed_out';
  else if (stop === 'cancel') state = 'cancelled';
  else if (end.kind === 'signaled') state = 'signaled';
  else {
    state = 'exited';
    exitCode = end.code;
  }
  if (limitError) error = limitError;
  else if (compileError) {
    const msg = new TextDecoder().decode(caps.stderr.head().subarray(0, 8000)).trim();
    error = { code: 'compile_error', message: msg || `build step failed (${exitCode !== null ? `exit ${exitCode}` : signal})` };
  }

  // Report the exit now (the process has ended); the uploads follow and report on their own, so
  // a slow upload never holds back — or loses — how the job ended.
  const keep: Record<StreamName, string> = { stdout: caps.stdout.spoolPath, stderr: caps.stderr.spoolPath };
  const target = upload?.target ?? null;
  const streams = {
    stdout: { bytes: caps.stdout.bytes, lines: caps.stdout.totalLines(), artifactTruncated: caps.stdout.artifactTruncated() },
    stderr: { bytes: caps.stderr.bytes, lines: caps.stderr.totalLines(), artifactTruncated: caps.stderr.artifactTruncated() },
  };
  const toUpload: StreamCapture[] = [];
  for (const c of [caps.stdout, caps.stderr]) {
    if (c.spooledBytes === 0) {
      if (c.spoolCreated) rmSync(c.spoolPath, { force: true });
    } else if (target && inlineHoldsWhole({ ...inline, streams }, c.stream, c.head())) {
      // Protocol v4: the exit carries every byte of it, and the edge keeps the artifact there — no upload.
      rmSync(c.spoolPath, { force: true });
    } else if (target) toUpload.push(c);
  }
  const exit: JobExit = {
    type: 'job.exit',
    jobId: spec.jobId,
    state,
    exitCode,
    signal,
    timedOut: stop === 'timeout',
    durationMs,
    stdout: inline.stdout,
    stderr: inline.stderr,
    stdoutTruncated: inline.stdoutTruncated,
    stderrTruncated: inline.stderrTruncated,
    streams,
    artifactsUploaded: toUpload.length === 0 && (target !== null || caps.stdout.spooledBytes + caps.stderr.spooledBytes === 0),
  };
  if (toUpload.length) exit.pendingArtifacts = toUpload.map((c) => c.stream);
  if (error) exit.error = error;
  if (phase) exit.phase = phase;
  if (notices?.length) exit.notices = notices.slice(0, JOB_NOTICES_MAX);
  const artifacts = upload
    ? uploadStreams(
        upload.target,
        { jobId: spec.jobId, handle: spec.artifactHandle },
        toUpload.map((c) => ({
          stream: c.stream,
          file: c.spoolPath,
          bytes: c.spooledBytes,
          lines: c.artifactLines(),
          truncated: c.artifactTruncated(),
          grant: upload.grant,
        })),
        upload.log,
      )
    : Promise.resolve([]);
  return { exit, spool: target ? null : keep, artifacts, inlineRelayed };
}

/** A result with nothing to upload. */
export const settled = (exit: JobExit): JobResult => ({ exit, spool: null, artifacts: Promise.resolve([]), inlineRelayed: false });

function emptyExit(jobId: string, t0: number): JobExit {
  const empty = { bytes: 0, lines: 0, artifactTruncated: false };
  return {
    type: 'job.exit',
    jobId,
    state: 'failed_to_start',
    exitCode: null,
    signal: null,
    timedOut: false,
    durationMs: Math.round(performance.now() - t0),
    stdout: '',
    stderr: '',
    stdoutTruncated: false,
    stderrTruncated: false,
    streams: { stdout: empty, stderr: { ...empty } },
    artifactsUploaded: true,
  };
}

/** The exit of a job stopped (timeout, cancel) before its process started. */
export function stoppedEarly(jobId: string, t0: number, why: 'timeout' | 'cancel'): JobExit {
  const e = emptyExit(jobId, t0);
  return { ...e, state: why === 'timeout' ? 'timed_out' : 'cancelled', timedOut: why === 'timeout' };
}

/**
 * Never an exit 0: the process did not run. The message is the reason alone (the OS's or the
 * sandbox's); the edge words it for its caller (`Error: execute: spawn failed (…)`, the text the execute tool has always answered with).
 */
export function failedToStart(jobId: string, t0: number, detail: string, code = 'spawn_failed'): JobExit {
  return { ...emptyExit(jobId, t0), error: { code, message: detail || 'the process could not be started' } };
}
