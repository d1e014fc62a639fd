/**
 * An npm registry on 127.0.0.1 that holds only the packages it is given, served from npm's own cache
 * (which `npm ci` in the repository filled): installs of the packed `gatehouse` package fetch their
 * dependencies from it instead of the configured registry, and the test sees every request.
 *
 * The cache format is cacache's: an index entry per request URL (index-v5/, a bucket named by the
 * key's sha256) names the content's integrity; the content sits at content-v2/<algo>/<hex digest>.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';

export interface RegistryPackage {
  /** The package's directory in node_modules (its package.json is the manifest served). */
  dir: string;
}

export interface LocalRegistry {
  url: string;
  /** Request paths, in order. */
  requests: string[];
  close(): Promise<void>;
}

/** The registry npm is configured to fetch from: npm's cache keys its tarballs by their URL there. */
const UPSTREAM = execFileSync('npm', ['config', 'get', 'registry'], { encoding: 'utf8' }).trim().replace(/\/+$/, '');

function npmCacheDir(): string {
  return join(execFileSync('npm', ['config', 'get', 'cache'], { encoding: 'utf8' }).trim(), '_cacache');
}

/** The body npm cached for `url`, or null. */
function cached(cache: string, url: string): Buffer | null {
  const key = `make-fetch-happen:request-cache:${url}`;
  const h = createHash('sha256').update(key).digest('hex');
  const bucket = join(cache, 'index-v5', h.slice(0, 2), h.slice(2, 4), h.slice(4));
  if (!existsSync(bucket)) return null;
  let integrity: string | null = null;
  for (const line of readFileSync(bucket, 'utf8').split('\n')) {
    const json = line.slice(line.indexOf('\t') + 1);
    try {
      const e = JSON.parse(json) as { key: string; integrity: string | null };
      if (e.key === key) integrity = e.integrity; // the last entry wins (null: deleted)
    } catch {
      /* a torn line */
    }
  }
  if (!integrity) return null;
  const [algo, b64] = integrity.split(' ')[0].split('-');
  const hex = Buffer.from(b64, 'base64').toString('hex');
  const file = join(cache, 'content-v2', algo, hex.slice(0, 2), hex.slice(2, 4), hex.slice(4));
  return existsSync(file) ? readFileSync(file) : null;
}

/** Whether npm's cache holds every package's tarball (else the registry cannot be made). */
export function tarballsCached(packages: RegistryPackage[]): boolean {
  const cache = npmCacheDir();
  return packages.every((p) => {
    if (!existsSync(join(p.dir, 'package.json'))) return false;
    const m = JSON.parse(readFileSync(join(p.dir, 'package.json'), 'utf8')) as { name: string; version: string };
    return cached(cache, tarballUrl(UPSTREAM, m.name, m.version)) !== null;
  });
}

const tarballUrl = (base: string, name: string, version: string) => `${base}/${name}/-/${name.split('/').pop()}-${version}.tgz`;

export async function startLocalRegistry(packages: RegistryPackage[]): Promise<LocalRegistry> {
  const cache = npmCacheDir();
  const requests: string[] = [];
  const docs = new Map<string, { manifest: Record<string, unknown>; tarball: Buffer }>();
  for (const p of packages) {
    const manifest = JSON.parse(readFileSync(join(p.dir, 'package.json'), 'utf8')) as Record<string, unknown> & { name: string; version: string };
    const tarball = cached(cache, tarballUrl(UPSTREAM, manifest.name, manifest.version));
    if (!tarball) throw new Error(`npm's cache (${cache}) has no tarball of ${manifest.name}@${manifest.version}; run npm ci in the repository`);
    docs.set(manifest.name, { manifest, tarball });
  }
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    requests.push(path);
    const tgz = /^\/(.+)\/-\/[^/]+-(\d[^/]*)\.tgz$/.exec(path);
    const doc = docs.get(tgz ? tgz[1] : path.slice(1));
    if (!doc || (tgz && tgz[2] !== doc.manifest.version)) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
      return;
    }
    if (tgz) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': doc.tarball.length }).end(doc.tarball);
      return;
    }
    const { name, version } = doc.manifest as { name: string; version: string };
    const integrity = `sha512-${createHash('sha512').update(doc.tarball).digest('base64')}`;
    const packument = {
      name,
      'dist-tags': { latest: version },
      versions: { [version]: { ...doc.manifest, _id: `${name}@${version}`, dist: { tarball: tarballUrl(base, name, version), integrity } } },
    };
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(packument));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    url: `${base}/`,
    requests,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
