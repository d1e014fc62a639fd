/**
 * Once per test run: the local D1 with every migration applied, kept as a template that each
 * `startGateway` copies instead of running `wrangler d1 migrations apply` again (about ten seconds
 * of CPU each, on ~90 gateways). Tests that need another start-up state still pass `skipMigrations`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { applyMigrations, D1_TEMPLATE_ENV } from '../e2e/harness.ts';

export default async function setup(): Promise<() => void> {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-d1-template-'));
  await applyMigrations(dir);
  // The test workers are forked after this runs and inherit the environment.
  process.env[D1_TEMPLATE_ENV] = dir;
  return () => rmSync(dir, { recursive: true, force: true });
}
