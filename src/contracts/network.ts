/**
 * Governed network egress: what a team policy says about a job's network (`network`, team-wide
 * and per rule), the grant the edge puts in a job's spec, and the messages the agent's egress
 * proxy exchanges with the edge (a connection that waits for a person's approval, and the record
 * of every connection for the audit log). A job has no network unless its grant says otherwise;
 * its only way out is the agent's proxy, which decides every connection against the grant.
 */
import { z } from 'zod';

/** A host pattern: an exact name (`registry.npmjs.org`), a `*.suffix` wildcard, or an IP literal. */
const HostPattern = z
  .string()
  .min(1)
  .max(253)
  .regex(
    /^(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.?$|^\[?[0-9A-Fa-f:.]+\]?$/,
    'a host is an exact name (registry.npmjs.org), a wildcard *.example.org, or an IP address',
  );

export const HttpMethod = z.enum(['GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'PATCH', 'DELETE']);
export type HttpMethod = z.infer<typeof HttpMethod>;

/** One entry of an allowlist: a host, optionally only some ports (default 80 and 443) and methods (default any). */
export const NetworkAllow = z.object({
  host: HostPattern,
  ports: z.array(z.number().int().min(1).max(65_535)).min(1).max(32).optional(),
  /** Enforced for plain HTTP; for HTTPS only the host is visible to the proxy (docs/network.md). */
  methods: z.array(HttpMethod).min(1).optional(),
  /**
   * Lets this entry reach private, loopback or link-local addresses (refused otherwise, so a
   * public name cannot be pointed at the agent's own network).
   */
  privateAddresses: z.boolean().optional(),
});
export type NetworkAllow = z.infer<typeof NetworkAllow>;

/** Named, documented host lists (the exact lists live in src/policy/network-presets.ts and docs/network.md). */
export const NetworkPresetName = z.enum(['package-registries']);
export type NetworkPresetName = z.infer<typeof NetworkPresetName>;

/** A team secret's name: what `gatehouse secrets set NAME` and `network.credentials[].secret` say. */
export const SecretName = z
  .string()
  .regex(/^[A-Za-z][A-Za-z0-9_.-]{0,63}$/, 'a secret name is 1-64 characters: a letter, then letters, digits, _ . - (e.g. GITHUB_TOKEN)');

/** An exact host name a credential is added for: never a wildcard or an address (its TLS certificate names it). */
const CredentialHost = z
  .string()
  .min(1)
  .max(253)
  .regex(/^([A-Za-z0-9-]+\.)+[A-Za-z][A-Za-z0-9-]*\.?$/, 'a credential host is an exact name with a dot (git.example.com): no wildcard, no IP address')
  .transform((h) => h.toLowerCase().replace(/\.$/, ''));

/** An HTTP header name (RFC 9110 token). */
const HeaderName = z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$/, 'a header name is 1-64 characters of an HTTP token (e.g. Authorization)');

/**
 * `network.credentials[]`: the agent's egress proxy adds `header: scheme value` to every request the
 * job sends to one of `hosts` (HTTPS, terminated by the proxy for exactly these hosts), with the value
 * of the team secret `secret`, which the job never sees. `scheme` (Bearer, token, Basic) is optional.
 */
export const CredentialBinding = z.object({
  secret: SecretName,
  hosts: z.array(CredentialHost).min(1).max(16),
  header: HeaderName.default('Authorization'),
  scheme: z
    .string()
    .regex(/^[A-Za-z0-9._-]{1,32}$/, 'a scheme is one word of 1-32 letters, digits, . _ - (Bearer, token, Basic)')
    .optional(),
});
export type CredentialBinding = z.infer<typeof CredentialBinding>;

/** Bindings one network section may have. */
export const CREDENTIAL_BINDINGS_MAX = 16;

/** Bytes one job may send / receive over all its connections before the proxy closes them. */
export const NETWORK_DEFAULT_BYTES_UP = 64 << 20;
export const NETWORK_DEFAULT_BYTES_DOWN = 1 << 30;

/** `network` in a policy document, team-wide or on a rule (a rule's replaces the team's for the commands it matches). */
export const NetworkPolicy = z.object({
  mode: z.enum(['off', 'allowlist', 'open']).default('off'),
  allow: z.array(NetworkAllow).max(200).default([]),
  presets: z.array(NetworkPresetName).default([]),
  /** A host outside the list: `deny` refuses the connection; `ask` holds it while a person approves (bounded). */
  unlisted: z.enum(['deny', 'ask']).default('deny'),
  maxBytesUp: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(NETWORK_DEFAULT_BYTES_UP),
  maxBytesDown: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(NETWORK_DEFAULT_BYTES_DOWN),
  /** Team secrets the agent's proxy adds to requests for given hosts (docs/credentials.md). */
  credentials: z.array(CredentialBinding).max(CREDENTIAL_BINDINGS_MAX).default([]),
});
export type NetworkPolicy = z.infer<typeof NetworkPolicy>;

/**
 * The grant in a job's spec: the team's (or the matching rule's) network policy with presets
 * expanded to host entries, decided at the edge and enforced again by the agent's proxy. Absent
 * or `off` = no network.
 */
export const NetworkGrant = z.object({
  mode: z.enum(['off', 'allowlist', 'open']),
  allow: z.array(NetworkAllow).max(1000),
  unlisted: z.enum(['deny', 'ask']),
  maxBytesUp: z.number().int().min(0),
  maxBytesDown: z.number().int().min(0),
  /** Which policy key decided this grant, for messages (`network` or `rules[3].network`). */
  source: z.string().max(100),
  /** The credentials the proxy adds (names only: the values travel in the job's start message, never in its spec). */
  credentials: z.array(CredentialBinding).max(CREDENTIAL_BINDINGS_MAX).optional(),
});
export type NetworkGrant = z.infer<typeof NetworkGrant>;

/** How long a connection waits for a person's answer to an `ask` before it is refused. */
export const EGRESS_ASK_WAIT_MS = 120_000;

/** Agent → edge: a job's connection to an unlisted host waits for a person's decision. */
export const EgressAsk = z.object({
  type: z.literal('egress.ask'),
  jobId: z.string(),
  /** Unique per ask within the job, echoed in the answer. */
  askId: z.string().min(1).max(64),
  host: z.string().max(253),
  port: z.number().int().min(1).max(65_535),
  method: z.string().max(16).optional(),
});
export type EgressAsk = z.infer<typeof EgressAsk>;

/** Edge → agent: the decision on an ask (`allow` covers the host:port for the rest of the job). */
export const EgressAnswer = z.object({
  type: z.literal('egress.answer'),
  jobId: z.string(),
  askId: z.string().min(1).max(64),
  decision: z.enum(['allow', 'deny']),
  /** Who or what decided: an approval id, `expired`, `no approver`. */
  by: z.string().max(200),
});
export type EgressAnswer = z.infer<typeof EgressAnswer>;

/** One connection's record, as the audit log keeps it. */
export const EgressConnection = z.object({
  host: z.string().max(253),
  port: z.number().int().min(0).max(65_535),
  /** The address the proxy connected to (absent when refused before resolving). */
  address: z.string().max(64).optional(),
  /** `CONNECT` for tunnelled TLS, the request's method for plain HTTP. */
  method: z.string().max(16).optional(),
  decision: z.enum(['allowed', 'refused']),
  /** The grant entry, preset or approval that decided, or why it was refused (`not in network.allow`, `private address`, `sni mismatch`, `byte cap`). */
  reason: z.string().max(300),
  bytesUp: z.number().int().min(0),
  bytesDown: z.number().int().min(0),
  /** The team secret the proxy added to this connection's requests (its name; never the value). */
  credential: SecretName.optional(),
  startedAt: z.string().max(40),
  ms: z.number().int().min(0),
});
export type EgressConnection = z.infer<typeof EgressConnection>;

/** Connections one job reports at most (the rest are counted, not listed). */
export const EGRESS_CONNECTIONS_MAX = 200;

/** Agent → edge: a batch of finished connections of a job (sent as they finish and before job.exit). */
export const EgressLog = z.object({
  type: z.literal('egress.log'),
  jobId: z.string(),
  connections: z.array(EgressConnection).max(50),
  /** Connections past EGRESS_CONNECTIONS_MAX that were not listed. */
  dropped: z.number().int().min(0).optional(),
});
export type EgressLog = z.infer<typeof EgressLog>;

/** One connection as job_status, the admin API, the dashboard and the CLI show it. */
export const EgressConnectionView = z.object({
  job_id: z.string(),
  host: z.string(),
  port: z.number().int(),
  address: z.string().nullable(),
  method: z.string().nullable(),
  decision: z.enum(['allowed', 'refused']),
  reason: z.string(),
  bytes_up: z.number().int(),
  bytes_down: z.number().int(),
  /** The team secret the proxy added to this connection's requests, by name. */
  credential: z.string().nullable().optional(),
  started_at: z.string().describe('ISO 8601'),
  ms: z.number().int(),
});
export type EgressConnectionView = z.infer<typeof EgressConnectionView>;

/** A job's network as job_status shows it: its grant's mode and key, and the connections its proxy reported. */
export const JobNetworkView = z.object({
  /** The job's grant (absent when the job's index row is not written yet). */
  mode: z.enum(['off', 'allowlist', 'open']).nullable(),
  /** The policy key that decided the grant: `network` or `rules[i].network`. */
  source: z.string().nullable(),
  connections: z.array(EgressConnectionView),
  allowed: z.number().int(),
  refused: z.number().int(),
  /** Connections past EGRESS_CONNECTIONS_MAX: counted, not listed. */
  dropped: z.number().int(),
  bytes_up: z.number().int(),
  bytes_down: z.number().int(),
});
export type JobNetworkView = z.infer<typeof JobNetworkView>;
