/**
 * How the interpreter table (src/policy/screens/interpreters.ts) describes a program: its options, which of them carry
 * inline code, and when it reads its program from stdin. The scan that applies an entry is ./scan.ts.
 */

/** When a program reads its program from stdin: the one rule applied to every entry that has one. */
export interface StdinCode {
  /**
   * `no-script`: when no script is given; `always`: also after the scripts or files it is given,
   * because a REPL on stdin follows them.
   */
  when: 'no-script' | 'always';
  /** Which positional arguments are the script (default: any). R ignores positionals; ocaml loads `.cmo` objects first. */
  script?: RegExp;
  /** Options whose value is the script (`R -f FILE`, `sbcl --script FILE`, `guile -s FILE`). */
  scriptOptions?: string[];
  /** Options after which what it reads from stdin cannot be a program (`erl -noshell`, `ed -r`). */
  safe?: string[];
  /** A positional that might be the value of an option this table does not know is not taken as the script. */
  strict?: boolean;
}

export interface Interpreter {
  /** The executable's basename; absent for programs only reached through `dotnet`. */
  match?: RegExp;
  /** The `dotnet` command or assembly that runs it (`dotnet fsi`, `dotnet …/csi.dll`). */
  dotnetCommand?: RegExp;
  /** Short letters that mean inline code (or reading code from stdin, like `-i`). */
  inlineShort: string;
  /** Long options (without `--`) that mean inline code. */
  inlineLong?: string[];
  /** Options spelled with a single dash and a word (`-eval`, `-expression`) that mean inline code. */
  inlineWord?: string[];
  /** Short letters that take a value: the rest of the cluster, or possibly the next argument. */
  valuedShort: string;
  /**
   * Short letters that take the NEXT argument while the rest of the cluster stays options:
   * bash runs `bash -oc posix CMD` as `-o posix -c CMD` (checked against the real bash).
   */
  nextArgShort?: string;
  /** Short letters whose value is only optional attached digits (perl `-l0`, `-0777`): scanning goes on after them. */
  digitsShort?: string;
  /** Short letters known to take no value (anything else might take one). */
  flagShort: string;
  /** After this valued letter the remaining arguments belong to the program (`python -m mod …`). */
  endShort?: string;
  /** Long options known to take no value. */
  flagLong?: string[];
  /** Arguments that make the interpreter do something other than read a program (`node --test`, `python -V`). */
  standalone?: RegExp;
  /** Long options known to take a value (`--title x`): that value is certainly not the script. */
  valuedLong?: string[];
  /** Single-dash options are whole words (`-nowarn`, `-cp x`), never clusters of letters. */
  wordOptions?: boolean;
  /** Word options that take the next argument (`kotlinc -d out`): that argument is certainly not the script. */
  valuedWord?: string[];
  /** Word options known to take no separate value (`-Xno-inline`, `-J-Xmx1g`). */
  flagWord?: RegExp;
  /** Option values are always attached (`--use:file`, `-r:x.dll`): no option takes the next argument. */
  valuesAttached?: boolean;
  /** Options that make it read the program from stdin (`ghc --interactive`, `ocaml -stdin`, `csi -i`). */
  stdinOptions?: string[];
  /** `/name[:value]` arguments are options too (`csi /r:x.dll`). */
  slashOptions?: boolean;
  /** After one of these, the arguments belong to the program (`sbcl --end-toplevel-options`). */
  endOptions?: string[];
  /** Parsed by screenPowershell (case-insensitive, abbreviable `-Parameter`s). */
  powershell?: boolean;
  /** Options end at the first positional argument (the script). */
  stopAtScript: boolean;
  /** `+x` arguments are options too (sh family). */
  plusOptions?: boolean;
  /** Node accepts `--experimental_loader` for `--experimental-loader`. */
  underscores?: boolean;
  /** `+cmd` runs an editor command (vim). */
  plusInline?: boolean;
  /** First positional arguments that mean inline code (`deno eval`). */
  inlineSubcommands?: string[];
  /** `data:` URLs anywhere (as module specifiers or option values) are inline code. */
  dataUrls?: boolean;
  /** Extra value checks (perl -M module specs, php -d ini settings). */
  valueCheck?: (opt: string, value: string) => string | null;
  /** Reads a program from stdin without a script (or after its files): the rule is `stdinCodeReason`. */
  stdinCode?: StdinCode;
}

/** Arguments that name stdin as a file (`-`, `/dev/stdin`, `/proc/self/fd/0`). */
export const STDIN = /^(?:-|\/dev\/stdin|\/dev\/fd\/0|\/proc\/(?:self|thread-self|\d+)\/fd\/0)$/;

/** Reads a program from stdin when no script is given. */
export const NO_SCRIPT: StdinCode = { when: 'no-script' };
// For a program that reads stdin after its files anyway, a doubtful script only changes the wording.
export const ALWAYS: StdinCode = { when: 'always', strict: true };
/** Never matches: for programs whose positional arguments are never the script (they are the program's own). */
export const NO_POSITIONAL_SCRIPT = /(?!)/;
