import { spawn } from 'node:child_process';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '../..');

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the real `gatehouse` CLI (bin/gatehouse.mjs) against a gateway with an admin token; `stdin` is piped to it (a secret's value, a policy). */
export function runCli(gatewayUrl: string, token: string, args: string[], o: { stdin?: string } = {}): Promise<CliRun> {
  return new Promise((res) => {
    const p = spawn(process.execPath, [join(ROOT, 'bin/gatehouse.mjs'), ...args], {
      env: { ...process.env, GATEHOUSE_URL: gatewayUrl, GATEHOUSE_ADMIN_TOKEN: token },
      stdio: [o.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    if (o.stdin !== undefined) p.stdin?.end(o.stdin);
    let stdout = '';
    let stderr = '';
    p.stdout?.on('data', (d) => (stdout += d));
    p.stderr?.on('data', (d) => (stderr += d));
    p.on('close', (code) => res({ code: code ?? -1, stdout, stderr }));
  });
}
