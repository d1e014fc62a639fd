/**
 * Checks of `network.credentials` the schema cannot make: a credential goes only to a host the same
 * network section lets the job reach on 443 (HTTPS, where the proxy adds it), with a header the proxy may
 * set, and each host gets each header from one secret only.
 */
import type { NetworkAllow, NetworkPolicy } from '../contracts/network.ts';

/** Headers that frame or route the request: the proxy never sets them from a secret. */
const FORBIDDEN_HEADERS = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'proxy-authorization',
  'proxy-connection',
  'expect',
]);

type Issue = { path: PropertyKey[]; message: string };

/** Whether an allow entry lets the job reach `host` on 443. */
function covers(e: NetworkAllow, host: string): boolean {
  if (e.ports && !e.ports.includes(443)) return false;
  const h = e.host.toLowerCase().replace(/\.$/, '');
  return h.startsWith('*.') ? host.endsWith(h.slice(1)) : h === host;
}

/** `allow`: the section's entries with presets expanded (network.ts), null when its mode is open. */
export function credentialIssues(n: NetworkPolicy, allow: NetworkAllow[] | null, path: PropertyKey[]): Issue[] {
  const issues: Issue[] = [];
  if (!n.credentials.length) return issues;
  if (n.mode === 'off') {
    return [{ path: [...path, 'credentials'], message: 'credentials are added to connections the job makes, and mode "off" allows none; set mode "allowlist"' }];
  }
  const seen = new Map<string, number>();
  n.credentials.forEach((c, i) => {
    const at = [...path, 'credentials', i];
    if (FORBIDDEN_HEADERS.has(c.header.toLowerCase())) {
      issues.push({ path: [...at, 'header'], message: `the proxy does not set "${c.header}" from a secret (it frames or routes the request); use Authorization or a service's own header` });
    }
    c.hosts.forEach((host, j) => {
      if (allow && !allow.some((e) => covers(e, host))) {
        issues.push({
          path: [...at, 'hosts', j],
          message: `"${host}" is not allowed on port 443 by ${path.map(String).join('.')}.allow or its presets: a credential goes only to a host the job may reach; add it to allow`,
        });
      }
      const key = `${host} ${c.header.toLowerCase()}`;
      const other = seen.get(key);
      if (other !== undefined) {
        issues.push({ path: [...at, 'hosts', j], message: `"${host}" already gets header ${c.header} from credentials[${other}]: one secret per host and header` });
      } else seen.set(key, i);
    });
  });
  return issues;
}
