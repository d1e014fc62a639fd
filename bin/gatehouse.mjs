#!/usr/bin/env node
// The `gatehouse` CLI. Its sources are TypeScript run by Node's type stripping (Node ≥ 22.18,
// which the project pins through the `node` devDependency: run it as `npx gatehouse ...`).
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  console.error(`gatehouse needs Node >= 22.18 (this is ${process.version}); run it through npm: npx gatehouse ...`);
  process.exit(1);
}
const { main } = await import(new URL('../executor/cli/main.ts', import.meta.url).href);
process.exitCode = await main(process.argv.slice(2));
