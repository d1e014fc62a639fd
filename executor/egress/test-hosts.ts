/**
 * The test-mode resolver switch: `GATEHOUSE_EGRESS_TEST_HOSTS=registry.npmjs.org=127.0.0.1:4873,example.test=127.0.0.1`
 * makes the egress proxy send connections for those names to 127.0.0.1 (and the port given, else
 * the port asked for), as stand-ins for public hosts, so tests never leave the machine. Only
 * 127.0.0.1 is accepted as a target, and the agent refuses to start with the map unless
 * `GATEHOUSE_EGRESS_TEST_MODE=1` is set too: a production agent cannot be talked into it by a
 * stray variable alone (docs/network.md, "Agent side").
 */
import { normalizeHost } from './address.ts';

export type TestHosts = ReadonlyMap<string, { port?: number }>;

const TEST_HOSTS_ENV = 'GATEHOUSE_EGRESS_TEST_HOSTS';
const TEST_MODE_ENV = 'GATEHOUSE_EGRESS_TEST_MODE';

/** The map from the environment: null when unset; an error message when malformed or not allowed. */
export function testHostsFromEnv(env: NodeJS.ProcessEnv): { ok: true; hosts: TestHosts | null } | { ok: false; message: string } {
  const raw = env[TEST_HOSTS_ENV];
  if (raw === undefined || raw.trim() === '') return { ok: true, hosts: null };
  if (env[TEST_MODE_ENV] !== '1') {
    return {
      ok: false,
      message: `${TEST_HOSTS_ENV} is set but ${TEST_MODE_ENV}=1 is not: the test resolver sends jobs' connections to 127.0.0.1 and is for tests only; unset ${TEST_HOSTS_ENV} (production) or set both (tests)`,
    };
  }
  return parseTestHosts(raw);
}

/** `name=127.0.0.1[:port],…` → the map. */
export function parseTestHosts(raw: string): { ok: true; hosts: TestHosts } | { ok: false; message: string } {
  const hosts = new Map<string, { port?: number }>();
  for (const item of raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const m = /^([A-Za-z0-9.-]+)=127\.0\.0\.1(?::(\d{1,5}))?$/.exec(item);
    const port = m?.[2] ? Number(m[2]) : undefined;
    if (!m || (port !== undefined && (port < 1 || port > 65_535))) {
      return { ok: false, message: `${TEST_HOSTS_ENV}: "${item}" is not name=127.0.0.1[:port] (only 127.0.0.1 is allowed as a target)` };
    }
    hosts.set(normalizeHost(m[1]), port ? { port } : {});
  }
  return { ok: true, hosts };
}
