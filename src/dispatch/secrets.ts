/**
 * The team's secrets, in the team's Durable Object (team data stays with the team): one row per name
 * holding the value sealed by src/platform/secret-box.ts under the deployment's GATEHOUSE_SECRETS_KEY,
 * bound to the team and name, so a row copied elsewhere does not open. Nothing here ever returns a
 * value but `open`, which only the job start uses (jobs.ts: the values go in `job.start`, never the spec).
 *
 * ```ts
 * const secrets = new TeamSecrets(host);
 * await secrets.put('GITHUB_TOKEN', 'ghp_…', 'admin@example.com');
 * secrets.list(); // [{ name, created_at, updated_at, updated_by }]
 * await secrets.open(['GITHUB_TOKEN']); // { ok: true, value: [{ secret, value }] } or a refusal naming the secret
 * ```
 */
import type { CredentialValue, SecretView } from '../contracts/secrets.ts';
import { SECRETS_PER_TEAM_MAX } from '../contracts/secrets.ts';
import { openSecret, sealSecret, secretsKey } from '../platform/secret-box.ts';
import { migrate, type DispatchHost, type Migration } from './capability-host.ts';

const MIGRATIONS: readonly Migration[] = [
  {
    id: '1-secrets',
    sql: [
      `CREATE TABLE IF NOT EXISTS team_secrets (name TEXT PRIMARY KEY, sealed TEXT NOT NULL, created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL, updated_by TEXT NOT NULL)`,
    ],
  },
];

type Refusal = { code: 'config_error' | 'not_found' | 'quota_exceeded' | 'invalid_argument'; message: string };
export type SecretsAnswer<T> = { ok: true; value: T } | { ok: false; error: Refusal };

interface SecretRow {
  name: string;
  sealed: string;
  created_at: number;
  updated_at: number;
  updated_by: string;
}

export class TeamSecrets {
  private readonly host: DispatchHost;

  constructor(host: DispatchHost) {
    this.host = host;
    migrate(host, 'secrets', MIGRATIONS);
  }

  /** The additional data a sealed value is bound to: this team and this name. */
  private async context(name: string): Promise<string> {
    return `${await this.host.team()}/${name}`;
  }

  /** Sets (or replaces) a secret; refused without a secrets key, never stored in the clear. */
  async put(name: string, value: string, by: string): Promise<SecretsAnswer<{ created: boolean }>> {
    const key = await secretsKey(this.host.env);
    if (!key.ok) return key;
    const exists = this.host.sql.exec(`SELECT 1 FROM team_secrets WHERE name = ?`, name).toArray().length > 0;
    if (!exists && this.count() >= SECRETS_PER_TEAM_MAX) {
      return { ok: false, error: { code: 'quota_exceeded', message: `the team has ${SECRETS_PER_TEAM_MAX} secrets, the most it may keep; remove one first` } };
    }
    const sealed = await sealSecret(key.value, value, await this.context(name));
    const now = this.host.now();
    this.host.sql.exec(
      `INSERT INTO team_secrets (name, sealed, created_at, updated_at, updated_by) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at, updated_by = excluded.updated_by`,
      name,
      sealed,
      now,
      now,
      by,
    );
    return { ok: true, value: { created: !exists } };
  }

  /** Names and dates, never values. */
  list(): SecretView[] {
    const iso = (ms: number) => new Date(ms).toISOString();
    return this.host.sql
      .exec<Omit<SecretRow, 'sealed'>>(`SELECT name, created_at, updated_at, updated_by FROM team_secrets ORDER BY name`)
      .toArray()
      .map((r) => ({ name: r.name, created_at: iso(r.created_at), updated_at: iso(r.updated_at), updated_by: r.updated_by }));
  }

  /** Removes a secret: jobs started after this get no value for it (and are refused while a policy binds it). */
  delete(name: string): boolean {
    return this.host.sql.exec(`DELETE FROM team_secrets WHERE name = ?`, name).rowsWritten > 0;
  }

  /** The opened values of `names`, for one job's start; a refusal naming the first secret missing or unreadable. */
  async open(names: readonly string[]): Promise<SecretsAnswer<CredentialValue[]>> {
    if (!names.length) return { ok: true, value: [] };
    const key = await secretsKey(this.host.env);
    if (!key.ok) return key;
    const out: CredentialValue[] = [];
    for (const name of new Set(names)) {
      const row = this.host.sql.exec<Pick<SecretRow, 'sealed'>>(`SELECT sealed FROM team_secrets WHERE name = ?`, name).toArray()[0];
      if (!row) {
        return {
          ok: false,
          error: { code: 'not_found', message: `the policy's network.credentials name the secret "${name}", which the team does not have; set it: gatehouse secrets set ${name}` },
        };
      }
      const v = await openSecret(key.value, row.sealed, await this.context(name));
      if (!v.ok) return { ok: false, error: { code: v.error.code, message: `secret "${name}": ${v.error.message}` } };
      out.push({ secret: name, value: v.value });
    }
    return { ok: true, value: out };
  }

  private count(): number {
    return this.host.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM team_secrets`).one().n;
  }
}
