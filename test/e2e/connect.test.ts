/**
 * The README's "Connect a client" curl line, run as written against a real gateway and agent: one
 * POST with a client token runs `echo hello` and answers the tool result as one SSE `data:` line,
 * with no initialize handshake before it (the endpoint is stateless).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { hasCommand, requireParts, ROOT, startAgent, startGateway, testSandbox, type AgentProcess, type Gateway } from './harness.ts';
import { readmeBlock } from '../cli/readme.ts';

// curl is what the README shows; .ci/run installs it (scripts/install-system-deps.sh).
const HAVE_CURL = requireParts({ curl: hasCommand('curl') }, 'scripts/install-system-deps.sh installs it');

let gw: Gateway;
let agent: AgentProcess;
let root: string;

beforeAll(async () => {
  if (!HAVE_CURL) return;
  root = mkdtempSync(join(tmpdir(), 'gatehouse-connect-'));
  gw = await startGateway();
  agent = startAgent(gw, { token: await gw.token({ team: 'dev', scopes: ['agent'], subject: 'connect-agent' }), root, sandbox: testSandbox() });
  await agent.ready;
}, 180_000);

afterAll(async () => {
  await agent?.stop();
  await gw?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('connect a client with curl', () => {
  it.skipIf(!HAVE_CURL)(
    'runs the README curl line as written: execute echo hello, the result in one SSE data line',
    async () => {
      const lines = readmeBlock('connect-curl');
      expect(lines[0]).toMatch(/^curl /);
      // The npm start dev client token's scopes.
      const env = {
        ...process.env,
        GATEHOUSE_URL: gw.url,
        TOKEN: await gw.token({ team: 'dev', scopes: ['execute', 'artifacts:read'], subject: 'dev-client' }),
      };
      const { stdout } = await promisify(execFile)('/bin/sh', ['-ec', lines.join('\n')], { cwd: ROOT, env, timeout: 60_000 });
      const data = stdout.split('\n').filter((l) => l.startsWith('data: '));
      expect(data, stdout).toHaveLength(1);
      const answer = JSON.parse(data[0].slice(6)) as {
        id: number;
        result: { isError?: boolean; structuredContent: { stdout: string; exit_code: number; state: string } };
      };
      expect(answer.id).toBe(1);
      expect(answer.result.isError, stdout).toBeFalsy();
      expect(answer.result.structuredContent).toMatchObject({ stdout: 'hello\n', exit_code: 0, state: 'exited' });
    },
    120_000,
  );
});
