/**
 * The launcher: a small POSIX sh script the sandbox runs as the job's only top-level process.
 * It changes to the job's cwd, runs the build step (code mode) with stdin from /dev/null and
 * records its status, then `exec`s the run step, so the job itself replaces the launcher and
 * its exit status and signal are the job's. Every step runs under `env -i` with exactly the
 * job's environment. One process per job keeps every driver the same, and lets gVisor start
 * a pre-created sandbox with a single line on stdin instead of a `runsc exec` round trip.
 */
export interface LaunchPlan {
  /** Absolute cwd as the job sees it. */
  cwd: string;
  env: Record<string, string>;
  build?: string[];
  run: string[];
  /** Where the build step's exit status is written (inside the job dir). */
  buildStatusPath?: string;
  /**
   * When set, the run step is not `exec`-ed: the launcher waits for it and writes its status
   * here, so the agent learns the result before the sandbox has finished tearing down.
   */
  exitStatusPath?: string;
  /** e.g. ['/usr/bin/prlimit', '--nofile=64', '--'] */
  rlimitPrefix?: string[];
}

export const LAUNCHER_FILE = '.gatehouse-launch.sh';
export const BUILD_STATUS_FILE = '.gatehouse-build-status';
export const EXIT_STATUS_FILE = '.gatehouse-exit-status';

/** Shell single-quoting: safe for any string without NUL. */
export function sq(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

export function launchScript(p: LaunchPlan): string {
  const env = Object.entries(p.env).map(([k, v]) => sq(`${k}=${v}`));
  const cmd = (argv: string[]) => [...(p.rlimitPrefix ?? []), '/usr/bin/env', '-i', ...env.map((e) => ({ raw: e })), ...argv]
    .map((a) => (typeof a === 'string' ? sq(a) : a.raw)).join(' ');
  const lines = [`cd ${sq(p.cwd)} || exit 126`];
  if (p.build && p.buildStatusPath) {
    lines.push(`${cmd(p.build)} </dev/null`);
    lines.push(`s=$?; echo "$s" > ${sq(p.buildStatusPath)}; [ "$s" -eq 0 ] || exit "$s"`);
  }
  if (p.exitStatusPath) {
    lines.push(cmd(p.run));
    lines.push(`s=$?; echo "$s" > ${sq(p.exitStatusPath)}; exit "$s"`);
  } else {
    lines.push(`exec ${cmd(p.run)}`);
  }
  return lines.join('\n') + '\n';
}

/** Names `env -i` takes as NAME=VALUE (anything else could be read as an option or a command). */
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
