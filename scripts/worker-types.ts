/**
 * Writes src/worker-configuration.d.ts, the Worker's bindings and [vars] as wrangler.toml declares
 * them (`wrangler types`), which src/env.ts builds `Env` on. `--check` only compares and exits 1
 * when the file is stale (run by `npm run lint`).
 *
 * The generated file also types Node's `process.env` with the Worker's vars as required keys; the
 * agent, CLI and tests share this tsconfig and build their own environments, so that block is dropped.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..');
const TARGET = 'src/worker-configuration.d.ts';
const SCRATCH = 'src/.worker-configuration.new.d.ts';

function generate(): string {
  const wrangler = join(ROOT, 'node_modules/.bin/wrangler');
  execFileSync(wrangler, ['types', SCRATCH, '--include-runtime=false', '--strict-vars=false', '--env-interface=WranglerEnv'], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, WRANGLER_SEND_METRICS: 'false' },
  });
  try {
    const text = readFileSync(join(ROOT, SCRATCH), 'utf8');
    return text
      .replace(SCRATCH, TARGET)
      .replace(/type StringifyValues<[\s\S]*?\n};\n/, '')
      .replace(/declare namespace NodeJS \{[\s\S]*?\n\}\n/, '');
  } finally {
    rmSync(join(ROOT, SCRATCH), { force: true });
  }
}

const fresh = generate();
if (process.argv.includes('--check')) {
  let current = '';
  try {
    current = readFileSync(join(ROOT, TARGET), 'utf8');
  } catch {}
  if (current !== fresh) {
    console.error(`${TARGET} does not match wrangler.toml: run \`npm run types\` and commit the result.`);
    process.exit(1);
  }
} else {
  writeFileSync(join(ROOT, TARGET), fresh);
  console.log(`wrote ${TARGET}`);
}
