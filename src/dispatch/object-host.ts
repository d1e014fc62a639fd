/**
 * The `DispatchHost` (host.ts) of the real Durable Object: its SQLite and bindings metered into the
 * object's usage (usage.ts), the team's name, the agents' sockets and their pings (which the platform
 * answers for it), and
 * the one alarm, which `wake` moves to the soonest wake-up any capability asks for. The unit tests'
 * host is test/dispatch/sql-host.ts.
 */
import type { Env } from '../env.ts';
import { AGENT_PING, AGENT_PONG } from '../contracts/agent-protocol.ts';
import { DEFAULT_HEARTBEAT_MS, gatewayConfig } from '../platform/config.ts';
import type { AuditEntry } from '../store/audit.ts';
import type { DispatchHost, Wakes } from './capability-host.ts';
import { meteredSql, type Usage } from './usage.ts';

/** What the host needs of the capabilities, built after it: their wake-ups and the audit log. */
export interface HostedCapabilities {
  wakes(): readonly Wakes[];
  audit(e: AuditEntry): void;
}

export function objectHost(ctx: DurableObjectState, env: Env, meter: Usage, caps: HostedCapabilities): DispatchHost {
  // Agents' heartbeats are answered by the platform without waking the object, hibernated or not; it
  // reads when it last answered each socket (lastPing). Only this exact text matches.
  // https://developers.cloudflare.com/durable-objects/api/websockets/#setwebsocketautoresponse
  ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair(AGENT_PING, AGENT_PONG));
  // Every request reaching the object passed the config guard; a broken value never gets here.
  const cfg = gatewayConfig(env);
  let teamName: string | null = null;
  const now = () => Date.now();
  return {
    sql: meteredSql(ctx.storage.sql, meter),
    transactionSync: (f) => ctx.storage.transactionSync(f),
    env: meter.meter(env),
    now,
    // The team is the name the Worker addressed this object by (`ctx.id.name`, also set in alarms);
    // an object whose alarm was set before names were kept finds it in storage.
    team: async () => {
      teamName ??= ctx.id.name ?? (await ctx.storage.get<string>('team')) ?? '';
      return teamName;
    },
    heartbeatMs: cfg.ok ? cfg.config.heartbeatMs : DEFAULT_HEARTBEAT_MS,
    sockets: () => ctx.getWebSockets(),
    lastPing: (ws) => ctx.getWebSocketAutoResponseTimestamp(ws)?.getTime() ?? null,
    wake: () => rearm(ctx.storage, caps.wakes(), now(), meter),
    audit: (e) => caps.audit(e),
    storageBytes: () => ctx.storage.sql.databaseSize,
  };
}

/** Moves the alarm to the soonest wake-up any capability asks for, unless one is set sooner. */
async function rearm(storage: DurableObjectStorage, wakes: readonly Wakes[], now: number, meter: Usage): Promise<void> {
  const at = Math.min(...wakes.map((w) => w.nextWake(now) ?? Infinity));
  if (at === Infinity) return;
  const current = await storage.getAlarm();
  if (current === null || current > at) {
    meter.alarmSet();
    await storage.setAlarm(at);
  }
}
