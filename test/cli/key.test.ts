/** `gatehouse key generate|rotate` as a user runs it (bin/gatehouse.mjs): offline, key files readable by their owner only, never overwritten. */
import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../support/cli.ts';
import { readmeBlock } from './readme.ts';

const dir = mkdtempSync(join(tmpdir(), 'gatehouse-key-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
// No gateway: these commands never talk to one.
const cli = (...args: string[]) => runCli('http://127.0.0.1:9', '', ['key', ...args]);

describe('gatehouse key', () => {
  it('generates a private key into a file only its owner reads, and never overwrites one', async () => {
    const file = join(dir, 'current.json');
    const g = await cli('generate', '--out', file, '--json');
    expect(g.code, g.stderr).toBe(0);
    const key = JSON.parse(readFileSync(file, 'utf8'));
    expect(key).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256', kid: JSON.parse(g.stdout).kid });
    expect(typeof key.d).toBe('string');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const again = await cli('generate', '--out', file);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('exists: pick a new file (a key file is never overwritten)');
    expect(readFileSync(file, 'utf8')).toBe(`${JSON.stringify(key)}\n`);
  });

  it('rotates: a new key with another kid, the step-2 secrets file, and the three steps in the order that refuses no token', async () => {
    const current = join(dir, 'rot-current.json');
    const next = join(dir, 'rot-next.json');
    expect((await cli('generate', '--out', current)).code).toBe(0);
    const r = await cli('rotate', '--key-file', current, '--out', next, '--env', 'staging');
    expect(r.code, r.stderr).toBe(0);
    const oldKid = JSON.parse(readFileSync(current, 'utf8')).kid;
    const newKid = JSON.parse(readFileSync(next, 'utf8')).kid;
    expect(newKid).not.toBe(oldKid);
    expect(statSync(next).mode & 0o777).toBe(0o600);
    const lines = r.stdout.split('\n');
    const bulk = join(dir, 'rot-next.bulk.json');
    expect(lines[1]).toContain(`npx wrangler secret put GATEHOUSE_VERIFY_KEY --env staging < ${next}`);
    expect(lines[2]).toContain(`npx wrangler secret bulk ${bulk} --env staging`);
    // Step 2's file: the new private key signs, the old key's public half verifies; readable by its owner only.
    const secrets = JSON.parse(readFileSync(bulk, 'utf8'));
    expect(JSON.parse(secrets.GATEHOUSE_SIGNING_KEY).kid).toBe(newKid);
    expect(JSON.parse(secrets.GATEHOUSE_VERIFY_KEY)).toMatchObject({ kid: oldKid });
    expect(JSON.parse(secrets.GATEHOUSE_VERIFY_KEY).d).toBeUndefined();
    expect(statSync(bulk).mode & 0o777).toBe(0o600);
    expect(r.stdout).toContain(`once no live token has KEY ${oldKid} in gatehouse token list`);
    const j = await cli('rotate', '--key-file', current, '--out', join(dir, 'rot-next-2.json'), '--env', 'staging', '--json');
    expect(JSON.parse(j.stdout)).toMatchObject({
      previousKid: oldKid,
      steps: expect.arrayContaining(['npx wrangler secret delete GATEHOUSE_VERIFY_KEY --env staging']),
    });
  });

  it("runs docs/operations.md's rotation block as written: its wrangler steps are the ones rotate prints", async () => {
    const [rotate, ...steps] = readmeBlock('key-rotate');
    expect(rotate).toBe('npx gatehouse key rotate --key-file signing-key.json --out signing-key-2.json --env production');
    const work = mkdtempSync(join(dir, 'doc-'));
    writeFileSync(join(work, 'signing-key.json'), readFileSync(join(dir, 'current.json')));
    const args = rotate
      .split(' ')
      .slice(3)
      .map((a) => (a.endsWith('.json') ? join(work, a) : a));
    const r = await cli(...args, '--json');
    expect(r.code, r.stderr).toBe(0);
    const printed = (JSON.parse(r.stdout) as { steps: string[] }).steps.map((s) => s.replaceAll(`${work}/`, ''));
    expect(steps).toEqual(printed);
  });

  it('says what is wrong with the current key file', async () => {
    const pub = join(dir, 'public.json');
    writeFileSync(pub, JSON.stringify({ kty: 'EC', crv: 'P-256', x: 'x', y: 'y', kid: 'k' }));
    const r = await cli('rotate', '--key-file', pub, '--out', join(dir, 'never.json'), '--env', 'staging');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('must be the current private EC P-256 JWK with a "kid"');
    expect((await cli('rotate', '--out', join(dir, 'never.json'))).stderr).toContain(
      '--key-file (the current key) and --out (where the new one goes) are required',
    );
  });
});
