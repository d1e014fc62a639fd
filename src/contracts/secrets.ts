/**
 * Team secrets (docs/credentials.md): values a team stores sealed at the edge for the egress proxy to add
 * to requests (`network.credentials`), the admin API's bodies and views, and the values a job's start
 * message carries to its agent. A value is never shown again once set: the list shows names and dates.
 */
import { z } from 'zod';
import { SecretName } from './network.ts';

/**
 * The longest secret value: it becomes one HTTP header line, and common servers refuse a header block over
 * 8 KiB (nginx's default large_client_header_buffers, Node's --max-http-header-size 16 KiB in all).
 */
const SECRET_VALUE_MAX_BYTES = 8192;
/** Secrets one team may keep. */
export const SECRETS_PER_TEAM_MAX = 100;

/** A value that can be an HTTP header value (RFC 9110 field-value): no control character, no line break. */
const SecretValue = z
  .string()
  .min(1, 'the secret value is empty')
  .refine((v) => new TextEncoder().encode(v).length <= SECRET_VALUE_MAX_BYTES, `a secret value is at most ${SECRET_VALUE_MAX_BYTES} bytes`)
  .refine((v) => !/[\u0000-\u0008\u000a-\u001f\u007f]/.test(v), 'a secret value goes into an HTTP header: no line break or control character')
  .refine((v) => v.trim() === v, 'a secret value has no leading or trailing space (a newline from `echo` is trimmed by the CLI)');

/** `PUT /admin/v1/secrets/:name`. */
export const SecretPut = z.strictObject({ value: SecretValue });

/** One secret as the admin API lists it: never its value. */
export const SecretView = z.object({
  name: SecretName,
  created_at: z.string().describe('ISO 8601'),
  updated_at: z.string().describe('ISO 8601'),
  updated_by: z.string(),
});
export type SecretView = z.infer<typeof SecretView>;

/** Edge → agent, in `job.start`: the opened value of each secret the job's grant binds (memory only on the agent). */
export const CredentialValue = z.object({ secret: SecretName, value: SecretValue });
export type CredentialValue = z.infer<typeof CredentialValue>;
