/**
 * Executor agent entry point: `node executor/main.ts --url … --token-file … --root …` (or GATEHOUSE_AGENT_TOKEN).
 * Finds the strongest sandbox, probes runtimes, connects out to the gateway and runs jobs
 * until SIGTERM/SIGINT. `runAgentCli` is also what `gatehouse agent` calls.
 */
import { WorkspaceStore } from './workspaces/store.ts';
import { WorkspaceSweeper } from './workspaces/sweep.ts';
import { mkdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Server } from 'node:http';
import { AGENT_USAGE, parseAgentArgs } from './config.ts';
import { Agent } from './agent.ts';
import { AgentCa } from './egress/agent-ca.ts';
import { JobRunner } from './jobs/runner.ts';
import { consoleLogger, type Logger } from './log.ts';
import { probeRuntimes } from './runtimes/probe.ts';
import { startDriver, startStrongestDriver } from './sandbox/index.ts';
import { systemView } from './sandbox/system-view.ts';
import { composeTrustedCas, trustEnv } from './sandbox/trusted-cas.ts';
import { AGENT_REFUSED_EXIT_CODE } from '../src/contracts/agent-grant.ts';
import { AgentMetrics, countSandboxStarts, serveMetrics } from './metrics.ts';

/** The package version, written into the bundle by scripts/build-dist.ts (a bundle may live anywhere, away from package.json). */
declare const __GATEHOUSE_VERSION__: string | undefined;

function agentVersion(): string {
  if (typeof __GATEHOUSE_VERSION__ === 'string') return __GATEHOUSE_VERSION__;
  try {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: string };
    return pkg.version ?? '0.0.0';
  } catch {
    return '0.0.0';
  }
}

/** Runs the agent until a stop signal; resolves with the process exit code (2: bad flags, 1: cannot start). */
export async function runAgentCli(argv: string[], logger?: Logger): Promise<number> {
  const parsed = parseAgentArgs(argv);
  if (!parsed.ok) {
    if (parsed.help) {
      process.stdout.write(AGENT_USAGE);
      return 0;
    }
    process.stderr.write(`error: ${parsed.message}\n\n${AGENT_USAGE}`);
    return 2;
  }
  const cfg = parsed.config;
  const log = logger ?? consoleLogger('gatehouse-agent', cfg.json);
  const unsupported = platformRefusal(process.platform);
  if (unsupported) {
    log.error(unsupported);
    return 1;
  }

  let root: string;
  try {
    mkdirSync(cfg.root, { recursive: true });
    root = realpathSync(cfg.root);
  } catch (e) {
    log.error(`cannot use --root ${cfg.root}: ${(e as Error).message}`);
    return 1;
  }
  const stateDir = resolve(
    cfg.stateDir ?? join(tmpdir(), `gatehouse-agent-${createHash('sha256').update(`${root}\0${cfg.agentId}`).digest('hex').slice(0, 16)}`),
  );
  if (stateDir === root || stateDir.startsWith(root + sep)) {
    log.error(`--state-dir must be outside the workspace (${root}): jobs must not reach the agent's own files`);
    return 1;
  }
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  const spoolDir = join(stateDir, 'spool');
  rmSync(spoolDir, { recursive: true, force: true }); // leftovers of a previous run that can no longer be reported

  // Listening from the start: a SIGINT or SIGTERM while sandboxes start still stops cleanly (once they are up), and a
  // second one (Ctrl-C in a terminal and a wrapper passing it on) does not cut the stop short.
  let refused = false;
  let onRefused = (): void => {};
  const stopWhy = new Promise<string>((res) => {
    process.on('SIGTERM', () => res('SIGTERM'));
    process.on('SIGINT', () => res('SIGINT'));
    onRefused = () => {
      refused = true;
      res('refused by the gateway');
    };
  });

  // Jobs trust what this host trusts, plus --extra-ca: a file that is not PEM certificates stops the start here.
  // The CA for credential hosts: made at each start, its key only in this process (agent-ca.ts); jobs trust it in the bundle.
  const agentCa = new AgentCa(join(stateDir, 'egress-ca.pem'));
  await agentCa.ready();
  const cas = composeTrustedCas({ stateDir, extraCaFiles: [...cfg.extraCaFiles, agentCa.certPath] });
  if (!cas.ok) {
    log.error(cas.error.message);
    return 1;
  }
  const driverOpts = { root, stateDir, warm: cfg.warm, caBundle: cas.value.hostPath };
  // Probing toolchain versions (a JVM start for kotlinc) overlaps the sandbox start-up.
  const probing = probeRuntimes();
  const d = cfg.sandbox ? await startDriver(cfg.sandbox, driverOpts, log) : await startStrongestDriver(driverOpts, log);
  if (!d.ok) {
    log.error(d.error.message);
    return 1;
  }
  const driver = d.value;
  const metrics = cfg.metricsPort === null ? undefined : new AgentMetrics();
  if (metrics) countSandboxStarts(driver, metrics);

  warnIfVisible(argv, log);
  const runtimes = await probing;
  log.info(`gatehouse agent ${agentVersion()} id ${cfg.agentId}`);
  log.info(`sandbox: ${driver.describe()}`);
  log.info(`limits: ${driver.limitMechanisms()}`);
  log.info(`workspace: ${root}; state: ${stateDir}`);
  log.info(
    `trusted CAs: ${cas.value.hostBundle ?? 'no host CA bundle found'}${cfg.extraCaFiles.length ? ` + ${cas.value.extraCount} certificate(s) from ${cfg.extraCaFiles.join(', ')}` : ''}`,
  );
  log.info(`capacity: ${cfg.capacity} jobs; ceilings: timeout ${cfg.maxTimeoutMs} ms, artifact ${cfg.maxArtifactBytes} bytes per stream`);
  log.info(`runtimes: ${runtimes.list.length ? runtimes.list.map((r) => `${r.name} (${r.path}: ${r.version})`).join(', ') : 'none found'}`);

  // Per-task workspaces live in the agent's private state dir, outside the shared root; only a sandbox that mounts them per job takes them.
  const workspaces = driver.supportsWorkspaces ? new WorkspaceStore(stateDir) : undefined;
  log.info(workspaces ? `workspaces: ${workspaces.dir}` : `workspaces: not with the ${driver.kind} sandbox (workspace jobs go to gVisor agents)`);
  const sweeper = workspaces ? new WorkspaceSweeper(workspaces, (dir) => driver.dropWorkspace?.(dir) ?? Promise.resolve(), log) : undefined;
  sweeper?.start();
  const runner = new JobRunner({
    agentCa,
    // The proxy's own TLS to a credential host trusts what jobs trust: a private registry's CA comes from --extra-ca.
    upstreamCas: cfg.extraCaFiles.map((f) => readFileSync(f, 'utf8')),
    driver,
    runtimes,
    root,
    spoolDir,
    capacity: cfg.capacity,
    ceilings: { maxTimeoutMs: cfg.maxTimeoutMs, maxArtifactBytes: cfg.maxArtifactBytes },
    upload: { url: cfg.url, token: cfg.token, ...(cfg.artifactPartBytes !== null ? { partBytes: cfg.artifactPartBytes } : {}) },
    log,
    egressTestHosts: cfg.egressTestHosts ?? null,
    agentEnv: trustEnv(driver.kind, cas.value.hostPath),
    ...(workspaces ? { workspaces } : {}),
  });
  if (cfg.egressTestHosts) log.warn(`egress test mode: ${[...cfg.egressTestHosts.keys()].join(', ')} resolve to 127.0.0.1 (GATEHOUSE_EGRESS_TEST_HOSTS)`);
  const agent = new Agent({
    url: cfg.url,
    token: cfg.token,
    agentId: cfg.agentId,
    version: agentVersion(),
    capacity: cfg.capacity,
    labels: cfg.labels,
    sandbox: driver.kind,
    runtimes: runtimes.list,
    runner,
    log,
    onRefused: () => onRefused(),
    metrics,
    ...(workspaces ? { workspaces, dropWorkspace: (dir: string) => driver.dropWorkspace?.(dir) ?? Promise.resolve() } : {}),
  });
  let metricsServer: Server | undefined;
  if (metrics && cfg.metricsPort !== null) {
    try {
      metricsServer = await serveMetrics(cfg.metricsPort, metrics, () => ({
        connected: agent.connected,
        running: runner.runningIds().length,
        capacity: cfg.capacity,
      }));
    } catch (e) {
      log.error(`cannot serve metrics on 127.0.0.1:${cfg.metricsPort} (--metrics-port): ${(e as Error).message}`);
      await driver.close();
      return 1;
    }
    log.info(`metrics: http://127.0.0.1:${cfg.metricsPort}/metrics and /healthz`);
  }
  agent.start();

  const why = await stopWhy;
  log.info(`${why}: stopping (cancelling running jobs, removing sandboxes)`);
  const hard = setTimeout(() => process.exit(1), 15_000);
  hard.unref();
  await agent.stop();
  metricsServer?.close();
  await driver.close();
  // Nothing to clean up at the next start: the default state dir goes (a chosen one stays).
  if (!cfg.stateDir) rmSync(stateDir, { recursive: true, force: true });
  log.info('stopped');
  clearTimeout(hard);
  // A refusal is permanent (the token's grant and these flags): a distinct status the systemd unit does not restart on.
  return refused ? AGENT_REFUSED_EXIT_CODE : 0;
}

/**
 * The agent runs on Linux only: every sandbox it drives (gVisor, bubblewrap) and its per-job limits (cgroups) are Linux
 * kernel features (docs/agents.md, "Operating systems"). null on Linux, else what to do instead.
 */
export function platformRefusal(platform: NodeJS.Platform): string | null {
  if (platform === 'linux') return null;
  return `the executor agent runs on Linux only (this is ${platform}): its sandboxes (gVisor, bubblewrap) and job limits (cgroups) are Linux kernel features; run it in a Linux VM, WSL 2 or a container (docs/agents.md, "Operating systems")`;
}

/** A token file under a directory sandboxes show read-only (/usr, /etc allowlist) would be readable by jobs. */
function warnIfVisible(argv: string[], log: Logger): void {
  const i = argv.findIndex((a) => a === '--token-file' || a.startsWith('--token-file='));
  const file = i < 0 ? process.env.GATEHOUSE_AGENT_TOKEN_FILE : argv[i].includes('=') ? argv[i].slice(argv[i].indexOf('=') + 1) : argv[i + 1];
  if (!file) return;
  let real: string;
  try {
    real = realpathSync(file);
  } catch {
    return;
  }
  const visible = systemView().find((e) => e.kind !== 'symlink' && (real === e.path || real.startsWith(e.path + '/')));
  if (visible) log.warn(`!!! the token file ${real} is under ${visible.path}, which sandboxes can read: move it (e.g. /root or /var/lib) !!!`);
}

const invokedDirectly = process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (invokedDirectly) {
  runAgentCli(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e) => {
      process.stderr.write(`gatehouse agent crashed: ${(e as Error).stack ?? e}\n`);
      process.exit(1);
    },
  );
}
