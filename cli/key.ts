/**
 * `gatehouse key generate|rotate`: the gateway's signing key, offline. A rotation never refuses a
 * token, even while instances of two versions serve at once: every instance first trusts the new key
 * (GATEHOUSE_VERIFY_KEY) before any signs with it; then one version signs with the new key and still
 * verifies the old one; the old one is retired once no live token names it (`gatehouse token list`,
 * column KEY). Nothing here talks to a gateway.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { GLOBAL_FLAGS, parseArgs, formatFlags, UsageError, type FlagSpecs } from './args.ts';
import { info, out, printJson } from './io.ts';
import { generateSigningKey, publicJwk } from '../src/auth/mint.ts';

const KEY_HELP = `gatehouse key — the gateway's signing key (offline)

usage:
  gatehouse key generate [--out FILE]                 a new private ES256 JWK (GATEHOUSE_SIGNING_KEY)
  gatehouse key rotate --key-file CURRENT --out NEW --env ENV   a new key, the step-2 secrets file beside it, and the steps
                                                      that switch to it with no refused token

Keep key files outside the repository (they are private keys); --out writes the file readable by you only
and never overwrites one.`;

const GENERATE_FLAGS: FlagSpecs = {
  out: { type: 'string', value: 'file', help: 'write the key to this file (mode 600; never overwritten) instead of stdout' },
};
const ROTATE_FLAGS: FlagSpecs = {
  'key-file': { type: 'string', value: 'path', help: 'the current signing key (a private JWK file)' },
  out: { type: 'string', value: 'file', help: 'where to write the new key (mode 600; never overwritten); the step-2 file goes beside it as <name>.bulk.json' },
  env: { type: 'string', value: 'name', help: 'the wrangler environment the steps name (staging, production); the top level is never deployed' },
};

const help = (usage: string, specs: FlagSpecs) =>
  out(`${usage}\n\nflags:\n${formatFlags({ ...specs, json: GLOBAL_FLAGS.json, help: GLOBAL_FLAGS.help }, false)}`);

export async function keyCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  switch (sub) {
    case 'generate':
      return generate(rest);
    case 'rotate':
      return rotate(rest);
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      out(KEY_HELP);
      return sub === undefined ? 2 : 0;
    default:
      throw new UsageError(`unknown key command "${sub}"; allowed: generate, rotate`);
  }
}

/** Writes a private key where only its owner reads it, never over an existing file. */
function writeKey(path: string, key: string): void {
  if (existsSync(path)) throw new UsageError(`--out ${path} exists: pick a new file (a key file is never overwritten)`);
  writeFileSync(path, `${key}\n`, { mode: 0o600, flag: 'wx' });
}

async function generate(argv: string[]): Promise<number> {
  const a = parseArgs(argv, GENERATE_FLAGS, 'key generate', false);
  if (a.flags.help) return (help('usage: gatehouse key generate [--out FILE]', GENERATE_FLAGS), 0);
  if (a.positionals.length) throw new UsageError(`key generate takes no positional arguments (got "${a.positionals.join(' ')}")`);
  const key = await generateSigningKey();
  const kid = (JSON.parse(key) as { kid: string }).kid;
  const file = a.flags.out as string | undefined;
  if (!file) return (out(key), 0);
  writeKey(file, key);
  if (a.flags.json) return (printJson({ kid, file }), 0);
  info(`wrote signing key ${kid} to ${file}; set it with: npx wrangler secret put GATEHOUSE_SIGNING_KEY < ${file}`);
  return 0;
}

async function rotate(argv: string[]): Promise<number> {
  const a = parseArgs(argv, ROTATE_FLAGS, 'key rotate', false);
  if (a.flags.help) return (help('usage: gatehouse key rotate --key-file CURRENT --out NEW --env ENV', ROTATE_FLAGS), 0);
  if (a.positionals.length) throw new UsageError(`key rotate takes no positional arguments (got "${a.positionals.join(' ')}")`);
  const current = a.flags['key-file'] as string | undefined;
  const next = a.flags.out as string | undefined;
  if (!current || !next) throw new UsageError('--key-file (the current key) and --out (where the new one goes) are required');
  const env = a.flags.env as string | undefined;
  if (!env || !/^[a-z][a-z0-9-]{0,62}$/.test(env)) {
    throw new UsageError(`--env is required: the wrangler environment whose key rotates (staging, production); got ${env === undefined ? 'none' : `"${env}"`}`);
  }
  let old: { kid?: string; kty?: string; crv?: string; d?: string };
  try {
    old = JSON.parse(readFileSync(current, 'utf8'));
  } catch (e) {
    throw new UsageError(`--key-file ${current} is not a readable JWK file: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  if (old.kty !== 'EC' || old.crv !== 'P-256' || !old.d || !old.kid) {
    throw new UsageError(`--key-file ${current} must be the current private EC P-256 JWK with a "kid" (as gatehouse key generate writes)`);
  }
  let key = await generateSigningKey();
  while ((JSON.parse(key) as { kid: string }).kid === old.kid) key = await generateSigningKey();
  const kid = (JSON.parse(key) as { kid: string }).kid;
  // Step 2 changes both secrets in one version: sign with the new key, keep verifying the old one (its public half).
  const bulk = next.replace(/(\.json)?$/, '.bulk.json');
  if (existsSync(bulk)) throw new UsageError(`${bulk} exists: pick a new --out (a key file is never overwritten)`);
  writeKey(next, key);
  writeKey(bulk, JSON.stringify({ GATEHOUSE_SIGNING_KEY: key, GATEHOUSE_VERIFY_KEY: JSON.stringify(publicJwk(JSON.stringify(old))) }));
  const steps = [
    `npx wrangler secret put GATEHOUSE_VERIFY_KEY --env ${env} < ${next}`,
    `npx wrangler secret bulk ${bulk} --env ${env}`,
    `npx wrangler secret delete GATEHOUSE_VERIFY_KEY --env ${env}`,
  ];
  if (a.flags.json) return (printJson({ kid, previousKid: old.kid, file: next, bulkFile: bulk, steps }), 0);
  out(
    [
      `new signing key ${kid} in ${next} (the current one is ${old.kid}). Switch with no refused token:`,
      `  1. ${steps[0]}      # every instance trusts ${kid} before any signs with it`,
      `  2. ${steps[1]}      # one version: signs with ${kid}, still verifies ${old.kid}`,
      `  3. once no live token has KEY ${old.kid} in gatehouse token list (re-mint those that matter; the rest expire):`,
      `     ${steps[2]}`,
      `Delete ${bulk} after step 2 (it holds the new private key). Signed-in dashboard sessions end at step 2 (people sign in`,
      'again); API tokens and agents are not affected.',
    ].join('\n'),
  );
  return 0;
}
