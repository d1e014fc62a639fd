/**
 * The agent's own certificate authority, made at agent start: the egress proxy terminates TLS with it for
 * exactly the hosts a job's credentials are bound to (credential-forward.ts), so it can add the header the
 * job never sees. Its private key lives only in this process's memory (never on disk, never in a sandbox);
 * its certificate is written to `certPath` for jobs to trust. A leaf certificate per host is made on first
 * use and kept for the agent's life. node-forge builds the X.509 (Node's crypto makes keys, not certificates).
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import forge from 'node-forge';

/** The CA lives as long as the agent; a day of slack either side for clock skew. */
const CA_DAYS = 397;
const DAY_MS = 86_400_000;

interface AgentCaFile {
  /** The CA certificate (PEM) jobs trust. */
  readonly certPath: string;
  /** Resolves once the CA exists and `certPath` is written. */
  ready(): Promise<void>;
}

export class AgentCa implements AgentCaFile {
  readonly certPath: string;
  private made: Promise<void> | null = null;
  private caKey: forge.pki.rsa.PrivateKey | null = null;
  private caCert: forge.pki.Certificate | null = null;
  /** One key for every leaf: leaves differ by name only, and the key never leaves this process. */
  private leafKeyPem = '';
  private leafKey: forge.pki.rsa.PublicKey | null = null;
  private readonly leaves = new Map<string, { key: string; cert: string }>();

  constructor(certPath: string) {
    this.certPath = certPath;
  }

  ready(): Promise<void> {
    this.made ??= Promise.resolve().then(() => this.make());
    return this.made;
  }

  private make(): void {
    const ca = rsaPair();
    this.caKey = ca.priv;
    const cert = forge.pki.createCertificate();
    cert.publicKey = ca.pub;
    cert.serialNumber = serial();
    cert.validity.notBefore = new Date(Date.now() - DAY_MS);
    cert.validity.notAfter = new Date(Date.now() + CA_DAYS * DAY_MS);
    const name = [
      { name: 'commonName', value: `Gatehouse agent egress CA ${randomBytes(4).toString('hex')}` },
      { name: 'organizationName', value: 'Gatehouse' },
    ];
    cert.setSubject(name);
    cert.setIssuer(name);
    cert.setExtensions([
      { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
      { name: 'subjectKeyIdentifier' },
    ]);
    cert.sign(ca.priv, forge.md.sha256.create());
    this.caCert = cert;
    const leaf = rsaPair();
    this.leafKey = leaf.pub;
    this.leafKeyPem = forge.pki.privateKeyToPem(leaf.priv);
    mkdirSync(dirname(this.certPath), { recursive: true });
    writeFileSync(this.certPath, forge.pki.certificateToPem(cert), { mode: 0o644 });
  }

  /** The CA certificate (PEM), for a job's trust bundle. */
  certPem(): string {
    if (!this.caCert) throw new Error('the agent CA is not made yet: await ready()');
    return forge.pki.certificateToPem(this.caCert);
  }

  /** A key and certificate for `host` (an exact name), signed by this CA. */
  leaf(host: string): { key: string; cert: string } {
    const known = this.leaves.get(host);
    if (known) return known;
    if (!this.caKey || !this.caCert || !this.leafKey) throw new Error('the agent CA is not made yet: await ready()');
    const cert = forge.pki.createCertificate();
    cert.publicKey = this.leafKey;
    cert.serialNumber = serial();
    cert.validity.notBefore = new Date(Date.now() - DAY_MS);
    // Well inside the 398 days clients accept for a leaf.
    cert.validity.notAfter = new Date(Date.now() + 90 * DAY_MS);
    cert.setSubject([{ name: 'commonName', value: host }]);
    cert.setIssuer(this.caCert.subject.attributes);
    cert.setExtensions([
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: [{ type: 2, value: host }] },
    ]);
    cert.sign(this.caKey, forge.md.sha256.create());
    const made = { key: this.leafKeyPem, cert: forge.pki.certificateToPem(cert) };
    this.leaves.set(host, made);
    return made;
  }
}

/** An RSA pair from Node's crypto (fast, native), as node-forge objects. */
function rsaPair(): { priv: forge.pki.rsa.PrivateKey; pub: forge.pki.rsa.PublicKey } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return {
    priv: forge.pki.privateKeyFromPem(privateKey.export({ type: 'pkcs1', format: 'pem' }).toString()) as forge.pki.rsa.PrivateKey,
    pub: forge.pki.publicKeyFromPem(publicKey.export({ type: 'spki', format: 'pem' }).toString()) as forge.pki.rsa.PublicKey,
  };
}

/** A positive random serial (hex; the top bit clear so it is not read as negative). */
function serial(): string {
  const b = randomBytes(16);
  b[0] &= 0x7f;
  return b.toString('hex');
}
