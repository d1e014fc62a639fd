/**
 * git with the repository's own programs switched off (policy `git.repositoryPrograms = "disable"`,
 * the strict preset). A workspace is writable, so `.git/config`, `.gitattributes` and hooks are
 * the caller's code; an allowed `git add`/`status`/`checkout`/`diff` would run the filters, diff
 * drivers, aliases, fsmonitor and hooks they name.
 *
 * git has no switch that turns all of them off, and command-line configuration overrides a key
 * only by its exact name. So the agent, inside the sandbox and just before the job's git starts:
 *   1. drops every GIT_* variable from the job's environment and sets {@link GIT_HARDENING_ENV}
 *      (no system or global configuration, no system attributes, no pager/editor/prompt);
 *   2. asks git itself (same cwd, same repository-selecting options, same environment) for every
 *      configured key that names a program ({@link GIT_LISTED_KEYS}): each is overridden with an
 *      empty value (git then runs nothing for a filter, and fails with "cannot run" for an empty
 *      diff/merge driver, textconv or alias — never the payload), except the few where git keeps
 *      the first value it reads ({@link GIT_REFUSED_KEYS}): then the job's git is not started;
 *   3. overrides the fixed-name keys in {@link GIT_FIXED_CONFIG}.
 * The overrides travel as GIT_CONFIG_COUNT/GIT_CONFIG_KEY_n/GIT_CONFIG_VALUE_n, which take
 * precedence over every configuration file and, unlike `-c`, allow any character in a name.
 *
 * Steps 2 and 3 read the configuration twice (once to list, once to run): sound only while no
 * other job of the team writes the workspace in between, which is why the strict preset runs one
 * job at a time (`limits.maxConcurrentJobs = 1`).
 */

/** Environment set for a hardened git (after every GIT_* of the job's own is dropped). */
export const GIT_HARDENING_ENV: Readonly<Record<string, string>> = {
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_ATTR_NOSYSTEM: '1',
  GIT_TERMINAL_PROMPT: '0',
  GIT_PAGER: 'cat',
  GIT_EDITOR: ':',
  GIT_SEQUENCE_EDITOR: ':',
};

/**
 * Fixed-name keys whose neutral value is also git's default behaviour, so setting them always
 * is harmless. Listed last, so they win over anything listed by name.
 * `safe.bareRepository=explicit` keeps git from adopting a bare repository (with its own config)
 * found by walking up from the cwd; the submodule keys keep git from recursing into submodules,
 * whose own configuration is not listed.
 */
export const GIT_FIXED_CONFIG: readonly (readonly [string, string])[] = [
  ['safe.bareRepository', 'explicit'],
  ['core.hooksPath', '/dev/null'],
  ['core.fsmonitor', 'false'],
  ['core.pager', 'cat'],
  ['core.editor', ':'],
  ['sequence.editor', ':'],
  ['core.sshCommand', 'false'],
  ['core.attributesFile', '/dev/null'],
  // An empty value empties the list of helpers gathered so far.
  ['credential.helper', ''],
  ['diff.ignoreSubmodules', 'all'],
  ['status.submoduleSummary', 'false'],
  ['submodule.recurse', 'false'],
  ['fetch.recurseSubmodules', 'false'],
  ['push.recurseSubmodules', 'no'],
  ['gpg.program', 'false'],
  ['commit.gpgSign', 'false'],
  ['tag.gpgSign', 'false'],
  ['tag.forceSignAnnotated', 'false'],
  ['push.gpgSign', 'false'],
  ['protocol.ext.allow', 'never'],
  ['protocol.fd.allow', 'never'],
];

/**
 * Keys overridden with an empty value when the repository sets them (as an extended regular
 * expression for `git config --name-only --get-regexp`, which lower-cases section and key and
 * keeps the name between). Empty is not "unset" for most of them: git then fails with
 * "cannot run" where it would have run the program — only when the repository configures one.
 */
const GIT_EMPTIED_KEYS =
  'filter\\..+\\.(clean|smudge|process)|diff\\..+\\.(command|textconv)|merge\\..+\\.driver|alias\\..+|' +
  'credential\\..+\\.helper|remote\\..+\\.vcs|(difftool|mergetool|man|browser)\\..+\\.(cmd|path)|' +
  'gpg\\..+\\.program|pager\\..+|submodule\\..+\\.update|diff\\.external|core\\.(askpass|alternaterefscommand)|' +
  'interactive\\.difffilter|web\\.browser|gpg\\.ssh\\.defaultkeycommand|imap\\.tunnel|help\\.(browser|format|htmlpath)|man\\.viewer|' +
  'guitool\\..+\\.cmd|hook\\..+\\.command';

/**
 * Refused outright (the job's git does not start), as `case` patterns of sh: keys where git keeps
 * the first value it reads, so a later override is ignored; and conditional includes, whose
 * condition (the branch, the remotes) can change within one git command and its child gits,
 * after the listing saw them false.
 */
export const GIT_REFUSED_KEYS: readonly string[] = ['core.gitproxy', 'remote.*.uploadpack', 'remote.*.receivepack', 'includeif.*'];

/** Everything the listing run asks git for. */
export const GIT_LISTED_KEYS = `^(${GIT_EMPTIED_KEYS}|${GIT_REFUSED_KEYS.map((g) => g.replaceAll('.', '\\.').replaceAll('*', '.+')).join('|')})$`;

/** When git could not list the configuration, the job's git is not started (the listing status follows). */
export const GIT_LISTING_FAILED =
  'gatehouse: git refused: could not list the repository configuration to switch its programs off (git.repositoryPrograms = "disable")';

/** The message of a refusal (printed by the launcher, which then exits 126). */
export function gitRefusedMessage(keyShellVar: string): string {
  return (
    `gatehouse: git refused: the repository configuration sets ${keyShellVar}, which can make git run a program that ` +
    'cannot be switched off (git.repositoryPrograms = "disable"); remove it from the repository configuration'
  );
}
/**
 * git's options before the subcommand that choose the repository (`-C dir`, `--git-dir`,
 * `--work-tree`, `--bare`): the listing run gets these so it reads the configuration the job's
 * git will read. Everything else before the subcommand is left out of the listing run.
 */
export function gitRepositoryOptions(args: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (!a.startsWith('-')) break;
    if ((a === '-C' || a === '--git-dir' || a === '--work-tree') && i + 1 < args.length) {
      out.push(a, args[++i]);
    } else if (a.startsWith('--git-dir=') || a.startsWith('--work-tree=') || a === '--bare') {
      out.push(a);
    } else if (['-c', '--namespace', '--super-prefix', '--config-env', '--list-cmds', '--attr-source'].includes(a)) {
      i++; // takes the next argument as its value
    }
  }
  return out;
}
