/**
 * The agent's own health and metrics on a local port (`gatehouse agent --metrics-port N`, bound to
 * 127.0.0.1 only): `GET /healthz` (200 while connected to the gateway, 503 while not) and
 * `GET /metrics` in the Prometheus text format (version 0.0.4), for a node exporter's scrape or a
 * local supervisor. Counters live in memory and start at zero with the process.
 */
import { createServer, type Server } from 'node:http';
import type { SandboxKind } from '../src/contracts/agent-protocol.ts';
import type { SandboxDriver } from './sandbox/types.ts';

/** What the agent is doing now, read at each scrape. */
export interface AgentGauges {
  connected: boolean;
  running: number;
  capacity: number;
}

export class AgentMetrics {
  jobsStarted = 0;
  reconnects = 0;
  readonly jobsEnded = new Map<string, number>();
  readonly sandboxStarts = new Map<SandboxKind, number>();
  readonly sandboxFailures = new Map<SandboxKind, number>();

  /** A job ended in `state` (exited, timed_out, failed_to_start, …). */
  jobEnded(state: string): void {
    bump(this.jobsEnded, state);
  }

  /** The Prometheus text exposition of the counters and the gauges now. */
  render(g: AgentGauges): string {
    const out: string[] = [];
    const metric = (name: string, type: 'counter' | 'gauge', help: string, samples: [Record<string, string>, number][]) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      for (const [labels, v] of samples) out.push(`${name}${labelText(labels)} ${v}`);
    };
    metric('gatehouse_agent_connected', 'gauge', '1 while the agent holds a welcomed connection to its gateway, else 0.', [[{}, g.connected ? 1 : 0]]);
    metric('gatehouse_agent_jobs_running', 'gauge', 'Jobs running on this agent now.', [[{}, g.running]]);
    metric('gatehouse_agent_capacity', 'gauge', 'Jobs this agent runs at once (--capacity).', [[{}, g.capacity]]);
    metric('gatehouse_agent_jobs_started_total', 'counter', 'Jobs this agent accepted and started.', [[{}, this.jobsStarted]]);
    metric('gatehouse_agent_jobs_ended_total', 'counter', 'Jobs that ended on this agent, by terminal state.', samples(this.jobsEnded, 'state'));
    metric('gatehouse_agent_sandbox_starts_total', 'counter', 'Sandboxes started for jobs, by sandbox kind.', samples(this.sandboxStarts, 'sandbox'));
    metric(
      'gatehouse_agent_sandbox_failures_total',
      'counter',
      'Sandboxes that failed to start for a job, by sandbox kind.',
      samples(this.sandboxFailures, 'sandbox'),
    );
    metric('gatehouse_agent_reconnects_total', 'counter', 'Connections to the gateway re-established after the first.', [[{}, this.reconnects]]);
    return `${out.join('\n')}\n`;
  }
}

/** Counts each sandbox the driver starts for a job, and each that fails to start. */
export function countSandboxStarts(driver: SandboxDriver, m: AgentMetrics): void {
  // Both series exist from the start (at 0): a rate over them needs no special case for "never happened".
  m.sandboxStarts.set(driver.kind, 0);
  m.sandboxFailures.set(driver.kind, 0);
  const acquire = driver.acquire.bind(driver);
  driver.acquire = async (...args) => {
    try {
      const s = await acquire(...args);
      bump(m.sandboxStarts, driver.kind);
      return s;
    } catch (e) {
      bump(m.sandboxFailures, driver.kind);
      throw e;
    }
  };
}

/** Serves /healthz and /metrics on 127.0.0.1:`port`; rejects when the port cannot be bound (in use, privileged). */
export async function serveMetrics(port: number, m: AgentMetrics, gauges: () => AgentGauges): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { Allow: 'GET, HEAD' }).end();
    } else if (path === '/metrics') {
      res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4; charset=utf-8' }).end(m.render(gauges()));
    } else if (path === '/healthz') {
      const g = gauges();
      res.writeHead(g.connected ? 200 : 503, { 'Content-Type': 'application/json' }).end(JSON.stringify({ ok: g.connected, ...g }));
    } else {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found: GET /healthz or /metrics\n');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}

function bump<K>(map: Map<K, number>, key: K): void {
  map.set(key, (map.get(key) ?? 0) + 1);
}

function samples(map: ReadonlyMap<string, number>, label: string): [Record<string, string>, number][] {
  return [...map].map(([k, v]) => [{ [label]: k }, v]);
}

/** Label values are ours (states, sandbox kinds), escaped anyway as the format asks: backslash, quote, newline. */
function labelText(labels: Record<string, string>): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`);
  return parts.length ? `{${parts.join(',')}}` : '';
}
