import { spawn } from 'node:child_process';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '../..');

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the real `gatehouse` CLI (bin/gatehouse.mjs) against a gateway with an admin token. */
export function runCli(gatewayUrl: string, token: string, args: string[]): Promise<CliRun> {
  return new Promise((res) => {
    const p = spawn(process.execPath, [join(ROOT, 'bin/gatehouse.mjs'), ...args], {
      env: { ...process.env, GATEHOUSE_URL: gatewayUrl, GATEHOUSE_ADMIN_TOKEN: token },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    p.on('close', (code) => res({ code: code ?? -1, stdout, stderr }));
  });
}
