/**
 * Reads the server name (SNI) from the first bytes a client sends in a CONNECT tunnel: a TLS
 * record of type handshake holding a ClientHello (RFC 8446 §4.1.2, RFC 6066 §3). The proxy
 * compares it with the CONNECT host, so a tunnel opened to an allowed host cannot carry a TLS
 * session to another name served at the same address.
 */

export type HelloResult =
  /** More bytes are needed to read the ClientHello. */
  | { kind: 'more' }
  /** A ClientHello with a server_name of type host_name. */
  | { kind: 'sni'; name: string }
  /** A ClientHello without a server name. */
  | { kind: 'none' }
  /** Not a TLS ClientHello. */
  | { kind: 'not-tls' };

/** The most the proxy buffers while waiting for a whole ClientHello (a ClientHello may span records; 16 KiB covers real ones). */
export const HELLO_MAX_BYTES = 16 * 1024;

export function readClientHello(buf: Buffer): HelloResult {
  // Reassemble the handshake bytes from consecutive handshake records (type 22).
  const hs: Buffer[] = [];
  let off = 0;
  let have = 0;
  let need = -1;
  while (true) {
    if (buf.length < off + 5) return { kind: 'more' };
    if (buf[off] !== 22 || buf[off + 1] !== 3) return { kind: 'not-tls' };
    const len = buf.readUInt16BE(off + 3);
    if (len === 0) return { kind: 'not-tls' };
    if (buf.length < off + 5 + len) return { kind: 'more' };
    hs.push(buf.subarray(off + 5, off + 5 + len));
    have += len;
    off += 5 + len;
    if (need < 0) {
      const first = Buffer.concat(hs);
      if (first.length < 4) continue;
      if (first[0] !== 1) return { kind: 'not-tls' }; // not a ClientHello
      need = 4 + first.readUIntBE(1, 3);
      if (need > HELLO_MAX_BYTES) return { kind: 'not-tls' };
    }
    if (have >= need) break;
  }
  return parseHello(Buffer.concat(hs).subarray(4, need));
}

function parseHello(b: Buffer): HelloResult {
  try {
    let p = 2 + 32; // version, random
    p += 1 + b[p]; // session id
    p += 2 + b.readUInt16BE(p); // cipher suites
    p += 1 + b[p]; // compression methods
    if (p === b.length) return { kind: 'none' }; // no extensions
    const extEnd = p + 2 + b.readUInt16BE(p);
    p += 2;
    if (extEnd > b.length) return { kind: 'not-tls' };
    while (p + 4 <= extEnd) {
      const type = b.readUInt16BE(p);
      const len = b.readUInt16BE(p + 2);
      p += 4;
      if (p + len > extEnd) return { kind: 'not-tls' };
      if (type === 0) {
        // server_name: list length, then entries of (type, length, name).
        let q = p + 2;
        const end = p + len;
        while (q + 3 <= end) {
          const nameType = b[q];
          const nameLen = b.readUInt16BE(q + 1);
          q += 3;
          if (q + nameLen > end) return { kind: 'not-tls' };
          if (nameType === 0) return { kind: 'sni', name: b.subarray(q, q + nameLen).toString('latin1') };
          q += nameLen;
        }
        return { kind: 'none' };
      }
      p += len;
    }
    return { kind: 'none' };
  } catch {
    return { kind: 'not-tls' };
  }
}
