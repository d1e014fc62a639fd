/**
 * What a sandbox needs to reach its job's egress proxy. The sandbox has no route out (gVisor
 * `--network=none`, bubblewrap's own network namespace), only a loopback. The proxy listens on
 * a Unix socket in the job's directory, which every driver bind-mounts into the sandbox (gVisor
 * connects to it with `--host-uds=open`); a tiny forwarder (forwarder.py, copied into the job dir)
 * the launcher starts inside listens on 127.0.0.1:EGRESS_PORT_INSIDE and relays each connection
 * to that socket. The job's proxy
 * variables point there. A program that ignores them finds no route and no DNS: nothing.
 */
import { chmodSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { shippedFile } from '../shipped-files.ts';
import type { Sandbox } from '../sandbox/types.ts';
import type { EgressProxy } from './proxy.ts';

/** The socket's name in the job dir (inside: `/job/<name>`). */
const EGRESS_SOCKET_FILE = '.gatehouse-egress.sock';
/** The forwarder's port on the sandbox's loopback. */
const EGRESS_PORT_INSIDE = 3128;
/** The forwarder's interpreter: -I -S -B, nothing from the environment or site dirs. */
const FORWARDER_PYTHON = '/usr/bin/python3';

/** Whether this host can run the forwarder inside a sandbox. */
export function forwarderAvailable(): boolean {
  return existsSync(FORWARDER_PYTHON);
}

/** The job's proxy variables (curl, npm, pip, git, go, cargo, and Node with NODE_USE_ENV_PROXY read some of these). */
function proxyEnv(): Record<string, string> {
  const url = `http://127.0.0.1:${EGRESS_PORT_INSIDE}`;
  return {
    HTTP_PROXY: url,
    HTTPS_PROXY: url,
    http_proxy: url,
    https_proxy: url,
    ALL_PROXY: url,
    all_proxy: url,
    NO_PROXY: '',
    no_proxy: '',
    npm_config_proxy: url,
    npm_config_https_proxy: url,
    NODE_USE_ENV_PROXY: '1',
  };
}

/** The forwarder's file in the job dir (inside: `/job/<name>`), beside the socket. */
const FORWARDER_FILE = '.gatehouse-egress-forwarder.py';
/** A longest Unix socket path (sun_path is 108 bytes with its NUL). */
const UNIX_PATH_MAX = 107;

/** The forwarder's command line (argv) for a job whose dir is `jobDirInside` (what it does: forwarder.py). */
function forwarderArgv(jobDirInside: string): string[] {
  return [FORWARDER_PYTHON, '-I', '-S', '-B', `${jobDirInside}/${FORWARDER_FILE}`, String(EGRESS_PORT_INSIDE), `${jobDirInside}/${EGRESS_SOCKET_FILE}`];
}

/** What the launcher runs before the job when the job has a way out. */
export interface EgressInside {
  /** The job's proxy variables, added to its env. */
  env: Record<string, string>;
  /** Starts the forwarder inside the sandbox (the launcher's prelude). */
  prelude: { argv: string[]; failure: string };
}

/**
 * Opens a job's way out of its sandbox: the proxy `makeProxy` makes listens on the socket in the
 * job dir, and the forwarder is copied beside it. The forwarder runs as the job's user, before the
 * job, in the job's own dir: a job that changes the file changes nothing but its own copy.
 */
export async function openJobEgress(
  sandbox: Pick<Sandbox, 'jobDirHost' | 'jobDirInside' | 'prepareJobDir'>,
  makeProxy: () => EgressProxy,
): Promise<{ ok: true; inside: EgressInside } | { ok: false; message: string }> {
  sandbox.prepareJobDir?.();
  const path = join(sandbox.jobDirHost, EGRESS_SOCKET_FILE);
  if (Buffer.byteLength(path) > UNIX_PATH_MAX) {
    return { ok: false, message: `the egress socket path ${path} is longer than ${UNIX_PATH_MAX} bytes; give the agent a shorter --state-dir` };
  }
  if (existsSync(path)) rmSync(path, { force: true });
  const proxy = makeProxy();
  try {
    await proxy.listen(path);
    // The job's user (the sandbox user, or the agent's own under bubblewrap) connects to it.
    chmodSync(path, 0o666);
  } catch (e) {
    return { ok: false, message: `the egress proxy did not start: ${(e as Error).message}` };
  }
  try {
    writeFileSync(join(sandbox.jobDirHost, FORWARDER_FILE), readFileSync(shippedFile('egressForwarder')), { mode: 0o644 });
  } catch (e) {
    return { ok: false, message: `the egress forwarder could not be put in the job dir: ${(e as Error).message}` };
  }
  return {
    ok: true,
    inside: {
      env: proxyEnv(),
      prelude: { argv: forwarderArgv(sandbox.jobDirInside), failure: 'gatehouse: the network forwarder did not start inside the sandbox' },
    },
  };
}
