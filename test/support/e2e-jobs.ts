/**
 * Jobs as the e2e tests run them through the MCP client: a call with what `job_status` says of it
 * (its network connections), and a per-task workspace (docs/workspaces.md) filled with a fixture.
 */
import { chmodSync, cpSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { call } from '../e2e/fleet.ts';

type S = Record<string, any>;

/** All a user sees of a job: its result, its status, the connections its proxy reported, and both as one string (`seen`). */
export async function runJob(client: Client, args: S, jobMs: number) {
  const r = await call(client, 'execute', { timeout_ms: 120_000, ...args }, jobMs);
  const status = r.s.job_id ? await call(client, 'job_status', { job_id: r.s.job_id }) : null;
  const connections = ((status?.s as S | undefined)?.network?.connections ?? []) as S[];
  return { ...r, status, connections, seen: JSON.stringify([r.r, status?.r]) };
}

/**
 * The workspace `id`, made by a first job if new and then emptied and given the files of `fixture`
 * (if any) on the agent host, under the agent's `--state-dir`. The job runs as an unprivileged
 * user in the sandbox: it may write everywhere in it. Returns the workspace's directory on the host.
 */
export async function prepareWorkspace(client: Client, stateDir: string, id: string, fixture: string | null, jobMs: number): Promise<string> {
  const made = await call(client, 'execute', { command: 'true', workspace: id }, jobMs);
  if ((made.s as S).exit_code !== 0) throw new Error(`workspace ${id}: ${made.t}`);
  const dir = join(stateDir, 'workspaces', id);
  for (const name of readdirSync(dir)) rmSync(join(dir, name), { recursive: true, force: true });
  if (fixture) cpSync(fixture, dir, { recursive: true });
  chmodSync(dir, 0o777);
  return dir;
}
