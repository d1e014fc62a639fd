/** How the proxy says no: the text a job's client shows, and a whole HTTP response for a raw socket. */

/** The body of a refusal: the host, why, and the policy key that would change it. */
export function refusalText(host: string, port: number, reason: string, policyKey?: string): string {
  return `gatehouse egress: refused ${host.includes(':') ? `[${host}]` : host}:${port}: ${reason}${policyKey ? `. To allow it, change ${policyKey} in the team policy` : ''}\n`;
}

const STATUS_TEXT: Record<number, string> = { 400: 'Bad Request', 403: 'Forbidden', 501: 'Not Implemented', 502: 'Bad Gateway' };
/** A reason phrase is one line of visible ASCII (RFC 9112, section 4); npm, pip and curl print it, most ignore the body. */
const REASON_MAX = 300;

/**
 * The status line's reason phrase for a refusal: the standard text, then the refusal itself, so a
 * client that prints only the status line (npm's `E403 403 Forbidden: … - GET url`, pip's
 * `Tunnel connection failed: 403 …`) still names the policy key.
 */
export function refusalReason(status: number, body: string): string {
  const said = body
    .replace(/^gatehouse egress: /, '')
    .replace(/[^\x20-\x7e]/g, ' ')
    .trim();
  return `${STATUS_TEXT[status] ?? 'Error'}: gatehouse egress ${said}`.slice(0, REASON_MAX);
}

/** A complete HTTP/1.1 error response for a raw socket (CONNECT, upgrade). */
export function refusal(status: number, body: string): string {
  return `HTTP/1.1 ${status} ${refusalReason(status, body)}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}
