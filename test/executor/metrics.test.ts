/**
 * The agent's local health and Prometheus metrics (executor/metrics.ts) and the `--metrics-port`
 * flag: the text format, sandbox starts counted through the driver, the server bound to 127.0.0.1
 * only, and a bad port refused by name. A real agent against a real gateway: test/e2e/observability.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'node:http';
import type { Server } from 'node:http';
import { AgentMetrics, countSandboxStarts, serveMetrics } from '../../executor/metrics.ts';
import { parseAgentArgs } from '../../executor/config.ts';
import type { SandboxDriver } from '../../executor/sandbox/types.ts';
import { freePort } from '../e2e/harness.ts';

let server: Server | undefined;
afterEach(() => {
  server?.close();
  server = undefined;
});

function get(port: number, path: string, host = '127.0.0.1'): Promise<{ status: number; type: string; body: string }> {
  return new Promise((resolve, reject) => {
    request({ host, port, path }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body }));
    })
      .on('error', reject)
      .end();
  });
}

describe('agent metrics', () => {
  it('renders counters and gauges in the Prometheus text format, with series by sandbox kind and end state', async () => {
    const m = new AgentMetrics();
    let fail = false;
    const driver = {
      kind: 'bwrap',
      acquire: async () => {
        if (fail) throw new Error('bwrap: setting up uid map: Permission denied');
        return {};
      },
    } as unknown as SandboxDriver;
    countSandboxStarts(driver, m);
    await driver.acquire('j1', {} as never);
    fail = true;
    await expect(driver.acquire('j2', {} as never)).rejects.toThrow(/Permission denied/);
    m.jobsStarted = 2;
    m.jobEnded('exited');
    m.jobEnded('failed_to_start');
    m.reconnects = 1;
    const text = m.render({ connected: true, running: 1, capacity: 4 });
    expect(text).toContain('# TYPE gatehouse_agent_sandbox_starts_total counter\ngatehouse_agent_sandbox_starts_total{sandbox="bwrap"} 1\n');
    expect(text).toContain('gatehouse_agent_sandbox_failures_total{sandbox="bwrap"} 1\n');
    expect(text).toContain('# TYPE gatehouse_agent_connected gauge\ngatehouse_agent_connected 1\n');
    expect(text).toContain('gatehouse_agent_jobs_running 1\n');
    expect(text).toContain('gatehouse_agent_jobs_started_total 2\n');
    expect(text).toContain('gatehouse_agent_jobs_ended_total{state="failed_to_start"} 1\n');
    expect(text).toContain('gatehouse_agent_reconnects_total 1\n');
    // Every sample line is `name{labels} value`; every metric has HELP and TYPE.
    for (const line of text.trimEnd().split('\n')) expect(line).toMatch(/^(# (HELP|TYPE) gatehouse_agent_\w+ .+|gatehouse_agent_\w+(\{\w+="[^"]*"\})? \d+)$/);
  });

  it('serves /metrics and /healthz on 127.0.0.1 only; /healthz is 503 while not connected', async () => {
    const port = await freePort();
    let connected = false;
    server = await serveMetrics(port, new AgentMetrics(), () => ({ connected, running: 0, capacity: 2 }));
    expect(server.address()).toMatchObject({ address: '127.0.0.1', port });
    const metrics = await get(port, '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.type).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(metrics.body).toContain('gatehouse_agent_connected 0\n');
    expect(await get(port, '/healthz')).toMatchObject({ status: 503, body: JSON.stringify({ ok: false, connected: false, running: 0, capacity: 2 }) });
    connected = true;
    expect((await get(port, '/healthz')).status).toBe(200);
    expect((await get(port, '/')).status).toBe(404);
  });

  it('refuses a port it cannot bind', async () => {
    const port = await freePort();
    server = await serveMetrics(port, new AgentMetrics(), () => ({ connected: true, running: 0, capacity: 1 }));
    await expect(serveMetrics(port, new AgentMetrics(), () => ({ connected: true, running: 0, capacity: 1 }))).rejects.toThrow(/EADDRINUSE/);
  });

  it('--metrics-port takes a TCP port and refuses anything else by name', () => {
    const base = ['--url', 'http://127.0.0.1:1', '--root', '/tmp/ws'];
    const env = { GATEHOUSE_AGENT_TOKEN: 't' };
    const ok = parseAgentArgs([...base, '--metrics-port', '9464'], env);
    expect(ok.ok && ok.config.metricsPort).toBe(9464);
    const off = parseAgentArgs(base, env);
    expect(off.ok && off.config.metricsPort).toBe(null);
    for (const bad of ['0', '65536', 'abc', '-1', '9464x', '']) {
      const r = parseAgentArgs([...base, `--metrics-port=${bad}`], env);
      expect(r.ok, bad).toBe(false);
      if (!r.ok && !r.help) expect(r.message).toMatch(/^--metrics-port must be (a whole number|between 1 and 65535), got .* \(a TCP port on 127\.0\.0\.1\)$/);
    }
  });
});
