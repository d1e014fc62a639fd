/**
 * Admission, answered by the team's own Durable Object: whether a token of the team is revoked,
 * which version of the team's policy is current (the policy cache keys on it), and whether the
 * team is suspended — so an authenticated request costs the shared D1 nothing, and one busy team
 * cannot slow another's token checks.
 *
 * Revocation takes effect on the next request because it is written here first: the admin API's
 * revoke reaches this object before it records the revocation in D1 and answers (see
 * src/admin/token-revocation.ts); a revoke this object did not take fails, and says so. The D1
 * rows stay the directory's record (listing tokens, and seeding an object that predates this).
 *
 * An object created before admission moved here, or a new one, seeds itself once from D1 (the
 * team's revocations and policy version): one D1 read per team, ever, not per request.
 */
import type { Env } from '../env.ts';
import type { admissionSeed, PolicyStamp } from '../store/admission.ts';
import { PolicyDocument, RetentionPolicy, teamRetentionOf } from '../contracts/policy.ts';
import { migrate, type Migration, type SqlHost } from './capability-host.ts';

/** A suspended team: every call is refused with this (src/admin/teams.ts). */
export interface Suspension {
  at: number;
  by: string;
  reason: string;
  /** The team was deleted (team-erasure.ts): for good, not until it is resumed. */
  deleted?: true;
}

export interface Admission {
  revoked: boolean;
  policy: PolicyStamp;
  suspended: Suspension | null;
}

const MIGRATIONS: readonly Migration[] = [
  {
    id: '1-admission',
    sql: [
      `CREATE TABLE IF NOT EXISTS revoked_tokens (jti TEXT PRIMARY KEY, revoked_at INTEGER NOT NULL)`,
      // One row per setting: 'policy' (PolicyStamp), 'suspended' (Suspension), 'seeded' (when D1 was read once).
      `CREATE TABLE IF NOT EXISTS team_settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)`,
    ],
  },
];

/** What admission reads of D1, once per object (src/store/admission.ts). */
export type AdmissionSeed = typeof admissionSeed;

export class TeamAdmission {
  private readonly host: SqlHost & { env: Env; team(): Promise<string> };
  private readonly seedFrom: AdmissionSeed;
  /** Memory copies of the settings (read once per instance; every write here updates them). */
  private settings: Map<string, string> | null = null;
  /** The settings' values as parsed, per key (dropped when the key is written). */
  private readonly parsed = new Map<string, unknown>();
  /** The revoked token ids, read once per instance (only this object writes them: `revoke` and the seed add to both). */
  private revokedIds: Set<string> | null = null;
  private seeding: Promise<void> | null = null;

  constructor(host: SqlHost & { env: Env; team(): Promise<string> }, seedFrom: AdmissionSeed) {
    this.host = host;
    this.seedFrom = seedFrom;
    migrate(host, 'admission', MIGRATIONS);
  }

  private get sql(): SqlStorage {
    return this.host.sql;
  }

  private setting<T>(key: string): T | null {
    this.settings ??= new Map(
      this.sql
        .exec<{ key: string; value: string }>(`SELECT key, value FROM team_settings`)
        .toArray()
        .map((r) => [r.key, r.value]),
    );
    if (this.parsed.has(key)) return this.parsed.get(key) as T | null;
    const v = this.settings.get(key);
    const value = v === undefined ? null : (JSON.parse(v) as T);
    this.parsed.set(key, value);
    return value;
  }

  private put(key: string, value: unknown | null): void {
    this.setting(key);
    this.parsed.delete(key);
    if (value === null) {
      this.sql.exec(`DELETE FROM team_settings WHERE key = ?`, key);
      this.settings?.delete(key);
      return;
    }
    const v = JSON.stringify(value);
    this.sql.exec(`INSERT INTO team_settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, v);
    this.settings?.set(key, v);
  }

  /** Reads the team's revocations and policy version from D1 the first time this object is asked. */
  private async seeded(): Promise<void> {
    if (this.setting('seeded') !== null) return;
    this.seeding ??= (async () => {
      const seed = await this.seedFrom(this.host.env, await this.host.team());
      this.host.transactionSync(() => {
        for (const r of seed.revoked) this.sql.exec(`INSERT OR IGNORE INTO revoked_tokens (jti, revoked_at) VALUES (?, ?)`, r.jti, r.revokedAt);
        this.revokedIds = null;
        // A stamp set here meanwhile (a policy saved during the seed) is newer than what D1 said a moment before.
        if (this.setting('policy') === null) {
          this.put('policy', seed.policy);
          this.put('retention', retentionOf(seed.document));
        }
        this.put('seeded', Date.now());
      });
    })().finally(() => {
      this.seeding = null;
    });
    await this.seeding;
  }

  async admit(jti: string): Promise<Admission> {
    await this.seeded();
    this.revokedIds ??= new Set(
      this.sql
        .exec<{ jti: string }>(`SELECT jti FROM revoked_tokens`)
        .toArray()
        .map((r) => r.jti),
    );
    const revoked = this.revokedIds.has(jti);
    return { revoked, policy: this.setting<PolicyStamp>('policy') ?? { version: null, updatedAt: null }, suspended: this.setting<Suspension>('suspended') };
  }

  /** Records a revocation (idempotent: the first time stays); effective for the next `admit`. */
  revoke(jti: string, revokedAt: number): number {
    this.sql.exec(`INSERT OR IGNORE INTO revoked_tokens (jti, revoked_at) VALUES (?, ?)`, jti, revokedAt);
    this.revokedIds?.add(jti);
    return this.sql.exec<{ revoked_at: number }>(`SELECT revoked_at FROM revoked_tokens WHERE jti = ?`, jti).one().revoked_at;
  }

  /** The team's policy was saved as `stamp`: requests admitted from now on use it. An older stamp arriving late changes nothing. */
  policyChanged(stamp: PolicyStamp, retention: RetentionPolicy): void {
    const cur = this.setting<PolicyStamp>('policy');
    if (cur?.version != null && stamp.version !== null && stamp.version < cur.version) return;
    this.put('policy', stamp);
    this.put('retention', retention);
  }

  /** How long and how much history the team keeps (the policy's `retention`, as last saved). */
  retention(): RetentionPolicy {
    return this.setting<RetentionPolicy>('retention') ?? RetentionPolicy.parse({});
  }

  suspend(s: Suspension | null): void {
    this.put('suspended', s);
  }

  suspended(): Suspension | null {
    return this.setting<Suspension>('suspended');
  }
}

/** The `retention` of a stored policy document; the defaults for none or one that no longer parses. */
function retentionOf(document: string | null): RetentionPolicy {
  if (document === null) return RetentionPolicy.parse({});
  try {
    const p = PolicyDocument.safeParse(JSON.parse(document));
    return p.success ? teamRetentionOf(p.data) : RetentionPolicy.parse({});
  } catch {
    return RetentionPolicy.parse({});
  }
}
