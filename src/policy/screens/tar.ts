/**
 * tar: options that run a program (checkpoint actions, --to-command, compressors, volume
 * scripts, remote shells). Arguments are read the way GNU tar reads them (see getopt.ts):
 * abbreviated long options, clustered short options (`-cIf`), a valued option taking the next
 * argument even when it is `--`, and the old dashless style (`tar cIf x.tar prog`), whose
 * valued letters take the following arguments in order before normal parsing resumes.
 */
import { argDenied, type Screen } from './common.ts';
import { longIs, scanOptions, type Arity, type GetoptSpec } from './getopt.ts';

const RUNS: { name: string; why: string }[] = [
  { name: 'checkpoint-action', why: 'it can run arbitrary commands (exec=…)' },
  { name: 'to-command', why: 'it pipes every file to an arbitrary command' },
  { name: 'use-compress-program', why: 'it runs an arbitrary program as the compressor' },
  { name: 'info-script', why: 'it runs an arbitrary script at the end of each volume' },
  { name: 'new-volume-script', why: 'it runs an arbitrary script at the end of each volume' },
  { name: 'rsh-command', why: 'it runs an arbitrary program as the remote shell' },
  { name: 'rmt-command', why: 'it runs an arbitrary program as the remote tape server' },
];
const SHORT: Record<string, string> = {
  I: 'it runs an arbitrary program as the compressor (--use-compress-program)',
  F: 'it runs an arbitrary script at the end of each volume (--info-script)',
};
/** Short options that take a value (GNU tar 1.34 `--help`). */
const VALUED = 'fCTXbKNLVgHIF';

const req = (names: string[]): Record<string, Arity> => Object.fromEntries(names.map((n) => [n, 'required' as const]));
const LONG: Record<string, Arity> = {
  ...req([
    'file',
    'directory',
    'files-from',
    'exclude',
    'exclude-from',
    'blocking-factor',
    'starting-file',
    'newer',
    'after-date',
    'newer-mtime',
    'tape-length',
    'label',
    'listed-incremental',
    'format',
    'use-compress-program',
    'info-script',
    'new-volume-script',
    'checkpoint-action',
    'to-command',
    'rsh-command',
    'rmt-command',
    'owner',
    'group',
    'mode',
    'mtime',
    'transform',
    'xform',
    'strip-components',
    'suffix',
    'volno-file',
    'record-size',
    'index-file',
    'level',
    'quoting-style',
    'quote-chars',
    'no-quote-chars',
    'exclude-tag',
    'exclude-tag-under',
    'exclude-tag-all',
    'exclude-ignore',
    'exclude-ignore-recursive',
    'pax-option',
    'hole-detection',
    'sparse-version',
    'warning',
    'group-map',
    'owner-map',
    'sort',
    'xattrs-include',
    'xattrs-exclude',
    'add-file',
    'set-mtime-format',
  ]),
  checkpoint: 'optional',
  occurrence: 'optional',
  backup: 'optional',
  'atime-preserve': 'optional',
  create: 'none',
  extract: 'none',
  list: 'none',
  append: 'none',
  update: 'none',
  diff: 'none',
  verbose: 'none',
  gzip: 'none',
  bzip2: 'none',
  xz: 'none',
  zstd: 'none',
  'no-same-owner': 'none',
  'keep-old-files': 'none',
  'to-stdout': 'none',
  totals: 'none',
};
const TAR_SPEC: GetoptSpec = { shortValued: VALUED, long: LONG };

export const screenTar: Screen = (args, ctx) => {
  let from = 0;
  const first = args[0];
  if (first !== undefined && /^[A-Za-z]+$/.test(first)) {
    // Old style: every letter is an option, each valued one taking the next argument in turn.
    for (const c of first) if (SHORT[c]) return argDenied(first, ctx.base, SHORT[c]);
    from = 1 + [...first].filter((c) => VALUED.includes(c)).length;
  }
  for (const t of scanOptions(args, TAR_SPEC, from)) {
    if (t.kind === 'long') {
      const hit = RUNS.find((r) => longIs(t, r.name));
      if (hit) return argDenied(t.arg, ctx.base, hit.why);
    } else if (t.kind === 'short' && SHORT[t.letter]) {
      return argDenied(t.arg, ctx.base, SHORT[t.letter]);
    }
  }
  return null;
};
