/**
 * The certificate authorities a job trusts: the agent host's CA bundle plus the agent's extra CA
 * files (`--extra-ca`, a TLS-inspecting proxy's or a private registry's CA), composed once at
 * start-up into one PEM file in the agent's state dir. Every driver shows that file read-only at
 * CA_BUNDLE_INSIDE (`none`: the job reads it where it is), and the runner names it in the job's
 * environment for every TLS stack a build uses (TRUST_ENV). The agent sets those names last, so a
 * job spec cannot point them elsewhere (docs/builds.md, "Trusted CAs").
 */
import { X509Certificate } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Result } from '../../src/contracts/errors.ts';
import type { SandboxKind } from '../../src/contracts/agent-protocol.ts';

/** Where a gVisor or bubblewrap sandbox shows the composed bundle. */
export const CA_BUNDLE_INSIDE = '/etc/gatehouse/ca-certificates.crt';

/** Where distributions keep the system bundle (Debian/Ubuntu/Alpine, Fedora/RHEL, openSUSE, others): the first that exists is used. */
const HOST_CA_BUNDLES = ['/etc/ssl/certs/ca-certificates.crt', '/etc/pki/tls/certs/ca-bundle.crt', '/etc/ssl/ca-bundle.pem', '/etc/ssl/cert.pem'];

/**
 * The variables that name a CA file for OpenSSL and what links it (curl, git, Python's ssl), Node,
 * Python requests, pip, npm, cargo and git. Node's NODE_EXTRA_CA_CERTS adds to its built-in list;
 * the others replace their default, which the bundle holds anyway (it starts with the host's).
 */
export const TRUST_ENV_NAMES = [
  'SSL_CERT_FILE',
  'NODE_EXTRA_CA_CERTS',
  'REQUESTS_CA_BUNDLE',
  'PIP_CERT',
  'npm_config_cafile',
  'CARGO_HTTP_CAINFO',
  'GIT_SSL_CAINFO',
] as const;

/** The job's trust variables in a `kind` sandbox: a `none` job reads the bundle where it is on the host. */
export function trustEnv(kind: SandboxKind, hostPath: string): Record<string, string> {
  const seen = kind === 'none' ? hostPath : CA_BUNDLE_INSIDE;
  return Object.fromEntries(TRUST_ENV_NAMES.map((n) => [n, seen]));
}

const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----\r?\n([\s\S]*?)-----END \1-----/g;

/**
 * The certificates of a PEM file, each re-encoded by Node's X.509 parser; an error naming the file
 * when it holds no certificate, a block that is not a certificate, or one that does not parse.
 */
export function pemCertificates(text: string, file: string): Result<string[]> {
  const bad = (why: string): Result<string[]> => ({
    ok: false,
    error: { code: 'config_error', message: `--extra-ca ${file}: ${why}; give a file of PEM certificates ("-----BEGIN CERTIFICATE-----" blocks)` },
  });
  const certs: string[] = [];
  for (const m of text.matchAll(PEM_BLOCK)) {
    if (m[1] !== 'CERTIFICATE') return bad(`it holds a "${m[1]}" block, not a certificate (a private key or a request does not belong here)`);
    try {
      certs.push(new X509Certificate(m[0]).toString().trim());
    } catch (e) {
      return bad(`certificate ${certs.length + 1} does not parse (${(e as Error).message})`);
    }
  }
  if (!certs.length) return bad('it holds no PEM certificate');
  return { ok: true, value: certs };
}

export interface TrustedCasOptions {
  /** The agent's private state dir: the bundle is written under it. */
  stateDir: string;
  /** Extra CA files (`--extra-ca`, GATEHOUSE_EXTRA_CA, the egress proxy's own CA), each PEM certificates. */
  extraCaFiles: readonly string[];
  /** Where to look for the host's bundle (default: the usual distribution paths). */
  hostBundles?: readonly string[];
}

export interface TrustedCas {
  /** The composed bundle on the host. */
  hostPath: string;
  /** The host bundle used, or null when this host has none. */
  hostBundle: string | null;
  /** How many certificates the extra files added. */
  extraCount: number;
}

/** Writes the host's bundle followed by the extra files' certificates into `<stateDir>/trusted-cas/`. */
export function composeTrustedCas(o: TrustedCasOptions): Result<TrustedCas> {
  const hostBundle = (o.hostBundles ?? HOST_CA_BUNDLES).find((p) => existsSync(p)) ?? null;
  const parts: string[] = [];
  if (hostBundle) {
    try {
      parts.push(readFileSync(hostBundle, 'utf8').trim());
    } catch (e) {
      return { ok: false, error: { code: 'config_error', message: `cannot read the host's CA bundle ${hostBundle}: ${(e as Error).message}` } };
    }
  }
  let extraCount = 0;
  for (const file of o.extraCaFiles) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (e) {
      return { ok: false, error: { code: 'config_error', message: `--extra-ca ${file}: cannot read it (${(e as Error).message})` } };
    }
    const certs = pemCertificates(text, file);
    if (!certs.ok) return certs;
    extraCount += certs.value.length;
    parts.push(`# --extra-ca ${file}\n${certs.value.join('\n')}`);
  }
  const dir = join(o.stateDir, 'trusted-cas');
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  const hostPath = join(dir, 'ca-certificates.crt');
  // Written whole then renamed: a sandbox starting meanwhile never sees half a bundle.
  writeFileSync(`${hostPath}.tmp`, `${parts.filter(Boolean).join('\n')}\n`, { mode: 0o644 });
  renameSync(`${hostPath}.tmp`, hostPath);
  return { ok: true, value: { hostPath, hostBundle, extraCount } };
}
