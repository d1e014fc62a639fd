/**
 * The agent's own log: one line per event, prefixed so it reads well when several agents share a
 * terminal, or (`gatehouse agent --json`) one JSON object per line for log collectors. Kept tiny
 * on purpose: operators grep it, tests wait on it.
 */
/** Structured facts of an event (a job's id, state, duration …): extra keys of its JSON line. */
type LogFields = Record<string, string | number | boolean | null>;

export interface Logger {
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
}

export function consoleLogger(prefix = 'gatehouse-agent', json = false): Logger {
  const line = json
    ? (level: string, msg: string, fields?: LogFields) => `${JSON.stringify({ time: new Date().toISOString(), level: level.toLowerCase(), msg, ...fields })}\n`
    : (level: string, msg: string) => `${new Date().toISOString()} ${prefix} ${level} ${msg}\n`;
  return {
    info: (m, f) => process.stdout.write(line('info', m, f)),
    warn: (m, f) => process.stderr.write(line('WARN', m, f)),
    error: (m, f) => process.stderr.write(line('ERROR', m, f)),
  };
}

export const silentLogger: Logger = { info() {}, warn() {}, error() {} };
