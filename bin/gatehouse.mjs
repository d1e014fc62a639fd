#!/usr/bin/env node
// The `gatehouse` command: `gatehouse agent …` runs the executor agent (`agent doctor` checks its
// host), everything else is the admin CLI. In the repository it runs the TypeScript sources with
// Node's type stripping (Node >= 22.19: `npx gatehouse …` uses the pinned devDependency); an
// installed package (`npm pack`) runs the bundles in dist/ that `npm run build` wrote.
import { existsSync } from 'node:fs';

const here = (p) => new URL(p, import.meta.url).href;
const fromSources = existsSync(new URL('../cli/main.ts', import.meta.url));
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 19)) {
  console.error(`gatehouse needs Node >= 22.19; this is ${process.version}${fromSources ? ' — run it through npm: npx gatehouse …' : ''}`);
  process.exit(1);
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
