/** Results the edge makes up itself, truthfully: a job it lost, a team with no agent. */
import type { JobExit } from '../contracts/agent-protocol.ts';

export function noAgentMessage(team: string): string {
  return `no executor agent is connected for team '${team}'; start one with: npx gatehouse agent --url <gateway url> --token-file <file with the agent token> --root <workspace dir> (mint the token with: gatehouse token create --team ${team} --scope agent)`;
}

export function lostExit(jobId: string, durationMs: number, why: string): JobExit {
  const empty = { bytes: 0, lines: 0, artifactTruncated: false };
  return {
    type: 'job.exit',
    jobId,
    state: 'lost',
    exitCode: null,
    signal: null,
    timedOut: false,
    durationMs,
    stdout: '',
    stderr: '',
    stdoutTruncated: false,
    stderrTruncated: false,
    streams: { stdout: empty, stderr: empty },
    artifactsUploaded: false,
    error: { code: 'lost', message: why },
  };
}
