/**
 * The real gateway (wrangler.toml, src/index.ts, workerd with local D1/R2/KV) started in-process through
 * wrangler's `unstable_startWorker`, with the Worker's outbound network replaced by a function of the
 * test (`dev.outboundService`): every global fetch the Worker makes reaches `outbound` instead of the
 * Internet. The OAuth provider fetches Client ID Metadata Documents with the global fetch and has no
 * switch to trust a test CA or another fetch, so this is how a test serves it an HTTPS document from a
 * public-looking host; everything inside the Worker (the compatibility flag, client-metadata.ts's
 * checks, the provider's own rules) runs as deployed.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { unstable_startWorker } from 'wrangler';
import { generateSigningKey, mintToken } from '../../src/auth/mint.ts';
import { ROOT, freePort, prepareD1 } from '../e2e/harness.ts';

export interface OutboundGateway {
  url: string;
  mcpUrl: string;
  token(o: { team: string; scopes: string[]; subject?: string }): Promise<string>;
  stop(): Promise<void>;
}

export async function startOutboundGateway(outbound: (req: Request) => Response | Promise<Response>): Promise<OutboundGateway> {
  const stateDir = mkdtempSync(join(tmpdir(), 'gatehouse-outbound-'));
  const persist = join(stateDir, 'state');
  const signingKey = await generateSigningKey();
  const envFile = join(stateDir, '.dev.vars');
  writeFileSync(envFile, `GATEHOUSE_SIGNING_KEY='${signingKey}'\nHEARTBEAT_MS='1000'\n`);
  Object.assign(process.env, { WRANGLER_SEND_METRICS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false', NO_COLOR: '1' });
  await prepareD1(persist);
  const port = await freePort();
  const worker = await unstable_startWorker({
    config: join(ROOT, 'wrangler.toml'),
    envFiles: [envFile],
    dev: {
      server: { hostname: '127.0.0.1', port },
      inspector: false,
      persist: persist,
      logLevel: 'warn',
      outboundService: outbound,
    },
  } as never);
  await worker.ready;
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    mcpUrl: `${url}/mcp`,
    token: async (o) =>
      (
        await mintToken({
          minter: { kind: 'bootstrap' },
          privateJwk: signingKey,
          issuer: url,
          audience: `${url}/mcp`,
          team: o.team,
          subject: o.subject ?? `test-${o.team}`,
          scopes: o.scopes,
          ttlSeconds: 3600,
        })
      ).token,
    async stop() {
      await worker.dispose();
      rmSync(stateDir, { recursive: true, force: true });
    },
  };
}
