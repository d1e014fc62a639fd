/**
 * `job_output`: a job's stdout/stderr from a byte offset. While the job runs: what the agent has
 * relayed so far (live tail, up to the job's inline cap); once its artifact is stored: the full
 * stream from R2. Any connection of the team can read, at any time.
 */
import type { McpServer } from '@modelcontextprotocol/server';
import { JOB_OUTPUT_DEFAULT_BYTES, JobOutputInput, JobOutputOutput } from '../../contracts/job-tools.ts';
import { isTerminal } from '../../contracts/jobs.ts';
import { jobResult, jobStatus, liveOutput } from '../../dispatch/client.ts';
import { getArtifactRows } from '../../store/artifacts.ts';
import { strictInput } from '../../contracts/strict-input.ts';
import { READ_ONLY, toolOutput } from '../register.ts';
import { missingScope, toolError, toolResult, type ToolContext } from '../context.ts';
import { auditJobCall, jobNotFound } from './job-common.ts';

export function registerJobOutput(server: McpServer, ctx: ToolContext): void {
  server.registerTool(
    'job_output',
    {
      title: 'Read a job\'s output',
      description:
        'Reads stdout or stderr of a job from a byte offset (max_bytes at a time; continue from next_offset until eof). ' +
        'Works while the job runs (live tail) and after it ended (stored artifact).',
      annotations: READ_ONLY,
      inputSchema: strictInput(JobOutputInput),
      outputSchema: toolOutput(JobOutputOutput),
    },
    async (input) => {
      const denied = missingScope(ctx, 'job_output', ['artifacts:read']);
      if (denied) return denied;
      const started = Date.now();
      const { team } = ctx.principal;
      const stream = input.stream ?? 'stdout';
      const offset = input.offset ?? 0;
      const max = input.max_bytes ?? JOB_OUTPUT_DEFAULT_BYTES;
      const v = await jobStatus(ctx.env, team, input.job_id);
      if (!v) {
        await auditJobCall(ctx, 'job_output', { jobId: input.job_id, ok: false, reason: 'not_found', started });
        return jobNotFound(input.job_id);
      }
      let data: Uint8Array = new Uint8Array(0);
      let total: number | null = null;
      let source: 'live' | 'artifact' | 'result' | 'none' = 'none';
      const ended = isTerminal(v.state);
      const row = ended && (v.artifact_state === 'complete' || v.artifact_state === 'partial')
        ? (await getArtifactRows(ctx.env, team, v.artifact_handle)).find((r) => r.stream === stream)
        : undefined;
      if (row) {
        source = 'artifact';
        total = row.bytes;
        if (offset < row.bytes) {
          const obj = await ctx.env.ARTIFACTS.get(row.r2Key, { range: { offset, length: Math.min(max, row.bytes - offset) } });
          if (!obj) return toolError(`Error: the artifact of job "${input.job_id}" has expired`, undefined, 'not_found');
          data = new Uint8Array(await obj.arrayBuffer());
        }
      } else if (ended && v.artifact_state === 'none' && (stream === 'stdout' ? v.stdout_bytes : v.stderr_bytes) === 0) {
        total = 0;
      } else if (ended && (v.artifact_state === 'failed' || v.artifact_state === 'partial' || v.artifact_state === 'none')) {
        // No stored artifact (its upload failed): the result's inline output is what the edge kept.
        const exit = (await jobResult(ctx.env, team, input.job_id))?.exit;
        const all = new TextEncoder().encode(exit?.[stream] ?? '');
        source = 'result';
        total = all.byteLength;
        data = all.subarray(Math.min(offset, all.byteLength), Math.min(offset + max, all.byteLength));
      } else {
        const live = await liveOutput(ctx.env, team, input.job_id, stream, offset, max);
        source = 'live';
        data = live?.data ?? new Uint8Array(0);
        total = ended ? (live?.total ?? 0) : null;
      }
      const full = total !== null && offset + data.byteLength >= total;
      // Never cut a UTF-8 character in two: the rest comes with the next read.
      if (!full) data = data.subarray(0, utf8Boundary(data));
      const next = offset + data.byteLength;
      const eof = ended && total !== null && next >= total;
      await auditJobCall(ctx, 'job_output', { jobId: input.job_id, command: { stream, offset, max_bytes: max }, ok: true, started, bytes: data.byteLength });
      return toolResult({
        job_id: input.job_id, stream, state: v.state, data: new TextDecoder().decode(data), offset, next_offset: next, eof, source, total_bytes: total,
      });
    },
  );
}

/** Length of the longest prefix of `b` that does not end inside a multi-byte UTF-8 sequence. */
export function utf8Boundary(b: Uint8Array): number {
  let i = b.byteLength;
  let back = 0;
  while (i > 0 && back < 4 && (b[i - 1] & 0xc0) === 0x80) (i--, back++);
  if (i === 0) return b.byteLength;
  const lead = b[i - 1];
  const need = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
  return need > back + 1 ? i - 1 : b.byteLength;
}
