/**
 * An HTTPS npm registry on 127.0.0.1 (private-https.ts) serving the tarballs of one directory, enough
 * for `npm ci` of a project whose committed lockfile names each tarball's URL and integrity: npm then
 * asks for nothing else. `/tiny-a/-/tiny-a-1.0.0.tgz` is `tiny-a-1.0.0.tgz`, and a scoped package's
 * `/@acme/greeting/-/greeting-1.0.0.tgz` is `acme-greeting-1.0.0.tgz` (the name `npm pack` gives it).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PrivateCa } from './private-ca.ts';
import { type PrivateHttps, type PrivateHttpsOptions, startPrivateHttps } from './private-https.ts';

export function startTarballRegistry(ca: PrivateCa, dir: string, o: PrivateHttpsOptions = {}): Promise<PrivateHttps> {
  return startPrivateHttps(ca, o, (req, res) => {
    const m = /^\/(?:@([a-z0-9-]+)\/)?([a-z0-9-]+)\/-\/(\2-\d+\.\d+\.\d+\.tgz)$/.exec(req.url ?? '');
    const file = m && join(dir, m[1] ? `${m[1]}-${m[3]}` : m[3]);
    if (file && existsSync(file)) res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(readFileSync(file));
    else res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
  });
}

/** `npm ci` against such a registry: no audit or funding calls (it serves tarballs only); a failed fetch fails soon instead of retrying for minutes. */
export const NPM_CI = ['ci', '--no-audit', '--no-fund', '--fetch-retries=0', '--fetch-timeout=30000'];
