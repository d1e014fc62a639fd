/**
 * Option-parsing helpers for the argument screens. They err on the side of seeing an option:
 * GNU long options may be abbreviated to any unambiguous prefix (`--to-com` is `--to-command`),
 * and short options may be clustered (`-pe`, `-lne`), so screens must match both forms.
 */

/** `--name[=value]` → its parts; null for anything else, including the bare `--` terminator. */
export function longOption(arg: string): { name: string; value: string | undefined } | null {
  if (!arg.startsWith('--') || arg.length === 2) return null;
  const eq = arg.indexOf('=');
  return eq < 0 ? { name: arg.slice(2), value: undefined } : { name: arg.slice(2, eq), value: arg.slice(eq + 1) };
}

/**
 * True if `arg` is `--full` (with or without `=value`) or, when `abbrev`, a prefix of it that
 * getopt_long would expand — except names in `exact`, legitimate options that happen to be
 * prefixes of the dangerous one (tar's `--checkpoint` vs `--checkpoint-action`).
 */
export function isLong(arg: string, full: string, o: { abbrev?: boolean; exact?: readonly string[] } = {}): boolean {
  const opt = longOption(arg);
  if (!opt) return false;
  if (opt.name === full) return true;
  if (!o.abbrev || opt.name === '') return false;
  if (o.exact?.includes(opt.name)) return false;
  return full.startsWith(opt.name);
}

/** The letters of a short-option cluster (`-xvf` → `xvf`); null for `-`, `--…` and non-options. */
export function shortCluster(arg: string): string | null {
  if (arg.length < 2 || arg[0] !== '-' || arg[1] === '-') return null;
  return arg.slice(1);
}
