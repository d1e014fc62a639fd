/**
 * Smaller tools with a single option that names a program to run: sort's compressor, split's
 * filter, diff/sdiff/diff3's diff program, zip's test command, rsync/ssh/scp remote shells and
 * proxy commands, wget's askpass and wgetrc commands. Each has a getopt spec (getopt.ts), so an
 * option's value — `--` included — is never mistaken for the end of the options.
 */
import { argDenied, type Screen } from './common.ts';
import { longIs, scanOptions, type Arity, type GetoptSpec, type Token } from './getopt.ts';

interface ProgramOptions {
  spec: GetoptSpec;
  /** Long options that take a program. */
  long: string[];
  /** Short letters that take a program. */
  short?: string;
  why: string;
  /** Extra check on every option token (ssh -o ProxyCommand=…). */
  extra?: (t: Token) => string | null;
}

const SSH_COMMAND_OPTION = /^(?:proxycommand|localcommand|permitlocalcommand|knownhostscommand|match|include|pkcs11provider|securitykeyprovider)\b/i;

const sshExtra = (t: Token): string | null =>
  t.kind === 'short' && t.letter === 'o' && t.value !== undefined && SSH_COMMAND_OPTION.test(t.value.trim())
    ? 'this ssh option runs a local command or loads code'
    : null;

const req = (names: string[]): Record<string, Arity> => Object.fromEntries(names.map((n) => [n, 'required' as const]));

const TABLE: Record<string, ProgramOptions> = {
  sort: {
    spec: {
      shortValued: 'koStT',
      long: {
        ...req([
          'key',
          'output',
          'buffer-size',
          'field-separator',
          'temporary-directory',
          'compress-program',
          'batch-size',
          'files0-from',
          'parallel',
          'random-source',
          'sort',
        ]),
        check: 'optional',
        debug: 'none',
        unique: 'none',
        reverse: 'none',
        'numeric-sort': 'none',
      },
    },
    long: ['compress-program'],
    why: 'it runs an arbitrary program to compress temporary files',
  },
  split: {
    spec: {
      shortValued: 'abClnt',
      long: {
        ...req(['suffix-length', 'bytes', 'line-bytes', 'lines', 'number', 'separator', 'filter', 'additional-suffix']),
        'numeric-suffixes': 'optional',
        'hex-suffixes': 'optional',
      },
    },
    long: ['filter'],
    why: 'it pipes every piece to an arbitrary shell command',
  },
  diff: {
    // diffutils 3.8 has no --diff-program, but a later diff may: a program-naming option is refused either way.
    spec: {
      shortValued: 'CDFIlSUWx',
      long: {
        ...req([
          'label',
          'from-file',
          'to-file',
          'ignore-matching-lines',
          'exclude',
          'exclude-from',
          'starting-file',
          'width',
          'tabsize',
          'show-function-line',
          'line-format',
          'horizon-lines',
          'diff-program',
        ]),
        context: 'optional',
        unified: 'optional',
        color: 'optional',
      },
    },
    long: ['diff-program'],
    why: 'it runs an arbitrary program instead of diff',
  },
  sdiff: {
    spec: { shortValued: 'Iow', long: req(['output', 'width', 'ignore-matching-lines', 'diff-program', 'tabsize']) },
    long: ['diff-program'],
    why: 'it runs an arbitrary program instead of diff',
  },
  diff3: {
    spec: { shortValued: 'L', long: req(['label', 'diff-program']) },
    long: ['diff-program'],
    why: 'it runs an arbitrary program instead of diff',
  },
  zip: {
    spec: { shortValued: 'bnOtx' + 'iPY', long: req(['unzip-command', 'temp-path', 'output-file', 'password', 'suffixes', 'exclude', 'include']) },
    long: ['unzip-command'],
    why: 'it runs an arbitrary command to test the archive',
    extra: (t) => (t.kind === 'short' && t.arg === '-TT' ? 'it runs an arbitrary command to test the archive' : null),
  },
  rsync: {
    spec: {
      shortValued: 'BfMTe',
      long: req([
        'rsh',
        'rsync-path',
        'filter',
        'exclude',
        'include',
        'exclude-from',
        'include-from',
        'files-from',
        'temp-dir',
        'compare-dest',
        'copy-dest',
        'link-dest',
        'chmod',
        'chown',
        'password-file',
        'log-file',
        'port',
        'timeout',
      ]),
    },
    long: ['rsh', 'rsync-path'],
    short: 'e',
    why: 'it runs an arbitrary program as the remote shell',
  },
  ssh: { spec: { shortValued: 'BbcDEeFiJLlmOoPpQRSWw' }, long: [], short: 'F', why: 'it reads a config file that can run local commands', extra: sshExtra },
  scp: { spec: { shortValued: 'cDFiJlPoSX' }, long: [], short: 'SF', why: 'it runs an arbitrary program as ssh or reads a config that can', extra: sshExtra },
  sftp: {
    spec: { shortValued: 'BbcDFiJlPRSso' },
    long: [],
    short: 'SFD',
    why: 'it runs an arbitrary program as ssh or reads a config that can',
    extra: sshExtra,
  },
  wget: {
    spec: {
      shortValued: 'oaOPiBTtwQUYDIXe',
      long: req([
        'use-askpass',
        'execute',
        'config',
        'output-file',
        'append-output',
        'output-document',
        'directory-prefix',
        'input-file',
        'base',
        'tries',
        'timeout',
        'wait',
        'quota',
        'user-agent',
        'domains',
        'include-directories',
        'exclude-directories',
      ]),
    },
    long: ['use-askpass', 'execute', 'config'],
    short: 'e',
    why: 'it runs a command or executes wgetrc commands',
  },
};

export function programOptionsScreen(base: string): Screen | undefined {
  if (!Object.hasOwn(TABLE, base)) return undefined;
  const t = TABLE[base];
  return (args, ctx) => {
    for (const tok of scanOptions(args, t.spec)) {
      if (tok.kind === 'operand') continue;
      const extra = t.extra?.(tok);
      if (extra) return argDenied(tok.kind === 'short' && tok.arg === '-o' ? `${tok.arg} ${tok.value}` : tok.arg, ctx.base, extra);
      if (tok.kind === 'long' && t.long.some((l) => longIs(tok, l))) return argDenied(tok.arg, ctx.base, t.why);
      if (tok.kind === 'short' && t.short?.includes(tok.letter)) return argDenied(tok.arg, ctx.base, t.why);
    }
    return null;
  };
}
