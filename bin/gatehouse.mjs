#!/usr/bin/env node
// The `gatehouse` command: `gatehouse agent …` runs the executor agent (`agent doctor` checks its
// host), everything else is the admin CLI. In the repository it runs the TypeScript sources with
// Node's type stripping; an installed package (`npm pack`) runs the bundles in dist/ that
// `npm run build` wrote. Both need Node >= 22.19: on an older Node (Debian's own) this file runs
// itself again on the Node 22 that the package's `node` dependency installed.
// Kept to syntax and APIs that Node 18 has, since that Node may be the one reading it.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = (p) => new URL(p, import.meta.url).href;
const fromSources = existsSync(new URL('../cli/main.ts', import.meta.url));
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 19)) process.exit(await onBundledNode());
delete process.env.GATEHOUSE_REEXEC;

/** Runs this command on the `node` dependency's binary; answers the exit code to leave with. */
async function onBundledNode() {
  let node = null;
  try {
    node = join(dirname(createRequire(import.meta.url).resolve('node/package.json')), 'bin/node');
  } catch { /* not installed */ }
  // GATEHOUSE_REEXEC: that Node is too old as well; say so rather than start it again.
  if (!node || !existsSync(node) || process.env.GATEHOUSE_REEXEC) {
    console.error(`gatehouse needs Node >= 22.19; this is ${process.version}, and the Node 22 this package brings ` +
      `(its \`node\` dependency) is ${node && existsSync(node) ? `at ${node} but too old` : 'missing'}: ` +
      (fromSources ? 'run npm install in the repository' : 'install the package again with its dependencies and install scripts (no --omit, no --ignore-scripts)'));
    return 1;
  }
  const child = spawn(node, [fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
    stdio: 'inherit', env: { ...process.env, GATEHOUSE_REEXEC: '1' },
  });
  // A signal sent to this process alone (systemd's KillMode=mixed, `kill -INT PID`) goes on to the child. Ctrl-C in a
  // terminal reaches the child too (same process group), so it may get SIGINT twice: the agent and the CLI's
  // long-running commands take a repeated SIGINT as the same request to stop.
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2']) process.on(sig, () => child.kill(sig));
  const [code, signal] = await new Promise((res) => child.once('exit', (c, s) => res([c, s])));
  if (signal) {
    // End the way the child ended, so a caller sees the same signal.
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  }
  return code ?? 1;
}

const argv = process.argv.slice(2);
let run;
if (argv[0] === 'agent' && argv[1] === 'doctor') {
  const m = await import(here(fromSources ? '../executor/doctor.ts' : '../dist/doctor.mjs'));
  run = () => m.runDoctorCli(argv.slice(2));
} else if (argv[0] === 'agent') {
  const m = await import(here(fromSources ? '../executor/main.ts' : '../dist/agent.mjs'));
  run = () => m.runAgentCli(argv.slice(1));
} else {
  const m = await import(here(fromSources ? '../cli/main.ts' : '../dist/cli.mjs'));
  run = () => m.main(argv);
}
const code = await run();
// The agent has stopped its sockets and sandboxes; exit even if a library left a timer behind.
if (argv[0] === "agent") process.exit(code);
process.exitCode = code;
