/**
 * A private certificate authority made for one test with the `openssl` command: its CA
 * certificate (what an agent is given with `--extra-ca`) and a server certificate it signed for
 * the names given, as a company's internal registry or TLS-inspecting proxy would present.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface PrivateCa {
  /** The CA certificate's file (PEM). */
  caFile: string;
  caPem: string;
  /** A certificate for `names` signed by the CA, and its key (PEM). */
  cert: string;
  key: string;
  dir: string;
  remove(): void;
}

export function openSslAvailable(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export function makePrivateCa(names: string[]): PrivateCa {
  const dir = mkdtempSync(join(tmpdir(), 'gh-private-ca-'));
  const f = (n: string) => join(dir, n);
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  ssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', f('ca.key'), '-out', f('ca.pem'),
    '-days', '2', '-subj', '/CN=Gatehouse test private CA', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  ssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', f('server.key'), '-out', f('server.csr'), '-subj', `/CN=${names[0]}`);
  writeFileSync(f('server.ext'), `subjectAltName=${names.map((n) => (/^[\d.]+$/.test(n) ? `IP:${n}` : `DNS:${n}`)).join(',')}\nextendedKeyUsage=serverAuth\n`);
  ssl('x509', '-req', '-in', f('server.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial', '-out', f('server.pem'), '-days', '2', '-extfile', f('server.ext'));
  return {
    caFile: f('ca.pem'),
    caPem: readFileSync(f('ca.pem'), 'utf8'),
    cert: readFileSync(f('server.pem'), 'utf8'),
    key: readFileSync(f('server.key'), 'utf8'),
    dir,
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
