/**
 * The agent's own log: one line per event on stderr, prefixed so it reads well when several
 * agents share a terminal. Kept tiny on purpose: operators grep it, tests wait on it.
 */
export interface Logger {
  info(msg: string): void;
  warn(msg: string): void;
  error(msg: string): void;
}

export function consoleLogger(prefix = 'gatehouse-agent'): Logger {
  const line = (level: string, msg: string) => `${new Date().toISOString()} ${prefix} ${level} ${msg}\n`;
  return {
    info: (m) => process.stdout.write(line('info', m)),
    warn: (m) => process.stderr.write(line('WARN', m)),
    error: (m) => process.stderr.write(line('ERROR', m)),
  };
}

export const silentLogger: Logger = { info() {}, warn() {}, error() {} };
