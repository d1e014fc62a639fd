/** How the proxy says no: the text a job's client shows, and a whole HTTP response for a raw socket. */

/** The body of a refusal: the host, why, and the policy key that would change it. */
export function refusalText(host: string, port: number, reason: string, policyKey?: string): string {
  return `gatehouse egress: refused ${host.includes(':') ? `[${host}]` : host}:${port}: ${reason}${policyKey ? `. To allow it, change ${policyKey} in the team policy` : ''}\n`;
}

/** A complete HTTP/1.1 error response for a raw socket (CONNECT, upgrade). */
export function refusal(status: number, body: string): string {
  const text = { 400: 'Bad Request', 403: 'Forbidden', 501: 'Not Implemented', 502: 'Bad Gateway' }[status] ?? 'Error';
  return `HTTP/1.1 ${status} ${text}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}
