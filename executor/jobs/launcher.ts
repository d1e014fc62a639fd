/**
 * The launcher: a small POSIX sh script the sandbox runs as the job's only top-level process.
 * It changes to the job's cwd, runs the build step (code mode) with stdin from /dev/null,
 * reports the build's status on the status pipe (fd 3), closes that pipe, then `exec`s the run
 * step, so the job itself replaces the launcher and its exit status and signal are the job's.
 *
 * Nothing the job can touch decides what the agent reports: the build status travels on a
 * pipe the agent created and the job never holds (the build runs with fd 3 closed, and fd 3 is
 * closed before the run step starts); the run's status is the sandbox wrapper's exit status,
 * which the host kernel hands to the agent. No status files in the job dir.
 *
 * Every driver runs it in a shell whose own environment is empty (gVisor's init: PATH only; bwrap
 * sets PWD, which the script unsets), so it sets exactly the job's environment with `export` and
 * the job's rlimits with `ulimit` builtins: no `env -i` or `prlimit` exec. One process per job keeps
 * every driver the same, and lets a sandbox set up ahead start its job with a single line.
 */
import { ulimitCommands, type JobRlimits } from './limits.ts';
import { GIT_FIXED_CONFIG, GIT_LISTED_KEYS, GIT_LISTING_FAILED, GIT_REFUSED_KEYS, gitRefusedMessage } from '../../src/contracts/git-hardening.ts';

export interface LaunchPlan {
  /** Absolute cwd as the job sees it. */
  cwd: string;
  env: Record<string, string>;
  build?: string[];
  run: string[];
  /** The job's rlimits, set with `ulimit` (soft = hard) before any step runs. */
  rlimits: JobRlimits;
  /**
   * The run step is git with the repository's programs switched off: the launcher lists the
   * configured program keys with the same git, cwd, env and these repository options, and
   * overrides each (src/contracts/git-hardening.ts). `env` is already the hardened one.
   */
  hardenGit?: { repositoryOptions: string[] };
  /**
   * A helper started before the job's env and limits are set (the egress forwarder: egress/sandbox-side.ts):
   * it must return once ready and leave a process behind that holds none of the job's descriptors.
   */
  prelude?: { argv: string[]; failure: string };
  /**
   * The job creates its workspace from git: clone into the (empty) workspace root `into` with the job's env
   * (its egress proxy's variables included) and limits, check out `ref`, then change to `cwd`. A failed
   * clone ends the job with status 125 and CLONE_FAILED on stderr.
   */
  clone?: { git: string; url: string; ref?: string; into: string };
}

/** What a failed workspace clone prints on stderr (the runner turns the job's error into `workspace_error`). */
const CLONE_FAILED = 'gatehouse: creating the workspace from git failed';
/** The exit status a launcher gives a failed workspace clone. */
export const CLONE_FAILED_STATUS = 125;

export const LAUNCHER_FILE = '.gatehouse-launch.sh';
/** The launcher's descriptor for the status pipe (`build <status>` lines). */
export const STATUS_FD = 3;

/** Shell single-quoting: safe for any string without NUL. */
export function sq(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

export function launchScript(p: LaunchPlan): string {
  // The variables dash manages itself cannot be exported as given (it refuses a non-numeric
  // OPTIND outright): the job gets them through `env` on its command line instead.
  const managed = Object.entries(p.env)
    .filter(([k]) => SHELL_MANAGED.includes(k) && k !== 'PWD')
    .map(([k, v]) => sq(`${k}=${v}`));
  const exported = Object.entries(p.env)
    .filter(([k]) => !SHELL_MANAGED.includes(k) || k === 'PWD')
    .map(([k, v]) => sq(`${k}=${v}`));
  // The shell exports the job's env: only the managed variables and `extra` (raw shell words put
  // after them; later assignments win in `env`) need `env`.
  const cmd = (argv: string[], extra?: string) => {
    const words = [...managed, ...(extra ? [extra] : [])].join(' ');
    return [...(words ? ['/usr/bin/env', { raw: words }] : []), ...argv].map((a) => (typeof a === 'string' ? sq(a) : a.raw)).join(' ');
  };
  const fd = STATUS_FD;
  // `cd` exported PWD and OLDPWD: drop them, so the job's env is exactly its own.
  const lines = [
    `cd ${sq(p.cwd)} || exit 126`,
    'unset OLDPWD PWD',
    ...(p.prelude
      ? [`${p.prelude.argv.map(sq).join(' ')} </dev/null >/dev/null 2>&1 ${fd}>&- || { printf '%s\\n' ${sq(p.prelude.failure)} >&2; exit 126; }`]
      : []),
    ...exported.map((e) => `export ${e}`),
    ...ulimitCommands(p.rlimits).map((c) => `${c} || exit 126`),
  ];
  if (p.clone) {
    const c = p.clone;
    const fail = `{ printf '%s\\n' ${sq(`${CLONE_FAILED} (${c.url}${c.ref ? ` at ${c.ref}` : ''})`)} >&2; exit ${CLONE_FAILED_STATUS}; }`;
    lines.push(`cd ${sq(c.into)} || exit 126`);
    lines.push(`${cmd([c.git, 'clone', '-q', '--', c.url, '.'])} </dev/null ${fd}>&- || ${fail}`);
    if (c.ref) lines.push(`${cmd([c.git, '-c', 'advice.detachedHead=false', 'checkout', '-q', c.ref, '--'])} </dev/null ${fd}>&- || ${fail}`);
    lines.push(`cd ${sq(p.cwd)} || exit 126`);
  }
  if (p.build) {
    lines.push(`${cmd(p.build)} </dev/null ${fd}>&-`);
    lines.push(`s=$?; echo "build $s" >&${fd}; exec ${fd}>&-; [ "$s" -eq 0 ] || exit "$s"`);
  } else {
    lines.push(`exec ${fd}>&-`);
  }
  if (p.hardenGit) {
    lines.push(...gitOverrideLines(p, cmd));
    lines.push(`exec ${cmd(p.run, '"$@" "GIT_CONFIG_COUNT=$gh_n"')}`);
  } else {
    lines.push(`exec ${cmd(p.run)}`);
  }
  return lines.join('\n') + '\n';
}

/** Variables dash sets or checks at start-up whatever the environment says (dash 0.5.12). */
const SHELL_MANAGED = ['IFS', 'OPTIND', 'PPID', 'PWD'];

function joinLines(files: string[]): string[] {
  return files.map((f) => `echo "$$" > ${sq(f)} || exit 125`);
}

/** Lines that make a launcher's shell join `cgroup` before anything else ('' without one). */
export function cgroupJoinLines(cgroup: { joinFiles(): string[] } | null): string {
  return cgroup ? joinLines(cgroup.joinFiles()).join('\n') + '\n' : '';
}

/**
 * Builds "$@" as GIT_CONFIG_KEY_n/GIT_CONFIG_VALUE_n pairs: first every program key git lists
 * (one per line: a config name cannot hold a newline), each set empty; then the fixed keys,
 * which therefore win. The listing run sees the fixed keys too (`safe.bareRepository`), so it
 * finds the same repository as the real run. A here-document, not a pipe, keeps the loop in
 * this shell; the listing's output is inserted as text and never expanded again.
 */
function gitOverrideLines(p: LaunchPlan, cmd: (argv: string[], extra?: string) => string): string[] {
  const fixed = GIT_FIXED_CONFIG.flatMap(([k, v], i) => [sq(`GIT_CONFIG_KEY_${i}=${k}`), sq(`GIT_CONFIG_VALUE_${i}=${v}`)]);
  const list = cmd(
    [p.run[0], ...p.hardenGit!.repositoryOptions, 'config', '--name-only', '--get-regexp', GIT_LISTED_KEYS],
    `${fixed.join(' ')} GIT_CONFIG_COUNT=${GIT_FIXED_CONFIG.length}`,
  );
  const lines = [
    // Exit 1 is "no such key"; anything else (a broken config, a failed start) fails closed.
    `gh_keys=$(${list} </dev/null 2>/dev/null); gh_s=$?`,
    `case "$gh_s" in 0|1) ;; *) printf '%s\\n' ${sq(GIT_LISTING_FAILED)}" ($gh_s)" >&2; exit 126;; esac`,
    'gh_n=0',
    'set --',
    'while IFS= read -r gh_k; do',
    '  [ -n "$gh_k" ] || continue',
    `  case "$gh_k" in ${GIT_REFUSED_KEYS.join('|')}) printf '%s\\n' ${sq(gitRefusedMessage('%KEY%')).replace('%KEY%', `'"$gh_k"'`)} >&2; exit 126;; esac`,
    '  set -- "$@" "GIT_CONFIG_KEY_$gh_n=$gh_k" "GIT_CONFIG_VALUE_$gh_n="',
    '  gh_n=$((gh_n + 1))',
    'done <<GATEHOUSE_GIT_KEYS',
    '$gh_keys',
    'GATEHOUSE_GIT_KEYS',
  ];
  for (const [k, v] of GIT_FIXED_CONFIG) {
    lines.push(`set -- "$@" "GIT_CONFIG_KEY_$gh_n="${sq(k)} "GIT_CONFIG_VALUE_$gh_n="${sq(v)}; gh_n=$((gh_n + 1))`);
  }
  return lines;
}

/**
 * Reads the build status from the status pipe: the first `build N` line, or null when the pipe
 * closed without one (the build never finished). Anything else on the pipe is ignored, and at
 * most a few bytes are kept.
 */
export function parseBuildStatus(text: string): number | null {
  const m = /^build (\d{1,3})\n/.exec(text);
  return m ? Number(m[1]) : null;
}

/** Names `env -i` takes as NAME=VALUE (anything else could be read as an option or a command). */
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
