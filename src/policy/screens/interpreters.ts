/**
 * Interpreters' inline-code options (`python -c`, `node -e/--eval/-p/--import/-r`, `perl -e/-E`,
 * `ruby -e`, `php -r`, `bash -c`, `Rscript -e`, `elixir -e/--eval`, …) and programs read from
 * stdin (`-`, `/dev/stdin`): denied unless `argumentRules[exe].allowInlineCode`. Allowing
 * `python3` is meant to run the workspace's scripts, not whatever code the caller sends.
 *
 * Code on stdin is one rule over this one table (each entry's `stdinCode`): a program that reads
 * its program from stdin when no script is given (`kotlinc`, `python3`, `tclsh`, `dotnet fsi`, …),
 * or after the files it is given (a REPL follows them: `iex`, `jshell`, `ghci`, `erl`, `vim`), is
 * denied with "no script is given, so it would read the program from stdin" (or, with files, "it
 * reads more program from stdin after the files it is given"). The `execute` tool's `stdin`
 * would otherwise be inline code the policy never sees. Left out on purpose, each checked against
 * the real program where installed: `elixir`, `escript`, `bun`, `java`, `emacs` print their usage
 * or fail without a script (java's source launcher cannot read the agent's stdin pipe: "Illegal
 * seek"); `awk`/`sed` take their program as an argument, which their own screens read, and refuse
 * `-f`; `bc`'s language cannot run programs or open files; compilers that read source from stdin
 * (`gcc -x c -`, `rustc -`) only compile it, and running the result needs its own allowlist entry.
 *
 * Parsing follows each interpreter's rule that options end at the script name (what follows is
 * the script's own arguments: `python3 manage.py -c x` is fine). To never mistake an option's
 * value for the script, an option whose value may be the next argument makes the scan continue
 * past that argument instead of stopping; clustered short options (`-pe`, `-lne`) are split.
 */
import { inlineDenied, type Screen, type ScreenContext } from './common.ts';
import { longOption, shortCluster } from './options.ts';

/** When a program reads its program from stdin: the one rule applied to every entry that has one. */
interface StdinCode {
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

interface Interpreter {
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

const STDIN = /^(?:-|\/dev\/stdin|\/dev\/fd\/0|\/proc\/(?:self|thread-self|\d+)\/fd\/0)$/;

/** Modules that evaluate text given on the command line or read code from stdin (`python -m timeit 'code'`). */
const PYTHON_CODE_MODULES = new Set(['timeit', 'code', 'pdb', 'asyncio', 'IPython', 'idlelib', 'ptpython', 'bpython', '_pyrepl', 'pyrepl']);
const PERL_MODULE = /^-?[A-Za-z_][\w:]*(?:=.*)?$/s;
const PHP_INI_CODE = /^\s*(?:auto_prepend_file|auto_append_file|allow_url_include|allow_url_fopen)\s*=/i;

const NO_SCRIPT: StdinCode = { when: 'no-script' };
// For a program that reads stdin after its files anyway, a doubtful script only changes the wording.
const ALWAYS: StdinCode = { when: 'always', strict: true };
/** Never matches: for programs whose positional arguments are never the script (they are the program's own). */
const NO_POSITIONAL_SCRIPT = /(?!)/;

const R_OPTIONS = {
  inlineShort: 'e',
  valuedShort: 'gdf',
  flagShort: 'hqsv',
  stopAtScript: true,
  flagLong: [
    'help',
    'version',
    'verbose',
    'vanilla',
    'no-save',
    'save',
    'no-environ',
    'no-site-file',
    'no-init-file',
    'no-restore',
    'quiet',
    'silent',
    'slave',
    'no-echo',
    'interactive',
  ],
  valueCheck: (opt: string, v: string) => (opt === '--file' && STDIN.test(v) ? 'it reads the program from stdin, which the policy cannot screen' : null),
};
const KOTLIN_VALUED = [
  'cp',
  'classpath',
  'd',
  'jdk-home',
  'jvm-target',
  'module-name',
  'script-templates',
  'api-version',
  'kotlin-home',
  'language-version',
  'P',
  'opt-in',
  'jdk-release',
  'jvm-default',
  'howtorun',
];
const KOTLIN_FLAGS =
  /^-(?:[XJD].*|include-runtime|java-parameters|no-jdk|no-reflect|no-stdlib|script|Werror|Wextra|progressive|nowarn|verbose|version|help|h)$/;
const ELIXIR_OPTIONS = { inlineShort: 'e', valuedShort: 'rS', flagShort: 'hv', inlineLong: ['eval', 'rpc-eval', 'erl'], standalone: /^-[vh]$/ };

const INTERPRETERS: Interpreter[] = [
  {
    match: /^(?:python[\d.]*|pypy[\d.]*)$/,
    inlineShort: 'ci',
    valuedShort: 'cmWXQ',
    endShort: 'm',
    flagShort: 'bBdEhIOqsSuvVxRP?',
    flagLong: ['help', 'version', 'help-env', 'help-xoptions', 'help-all'],
    valuedLong: ['check-hash-based-pycs'],
    stopAtScript: true,
    standalone: /^(?:-V+|-h|--help-\w+)$/,
    stdinCode: NO_SCRIPT,
    valueCheck: (opt, v) => (opt === '-m' && PYTHON_CODE_MODULES.has(v.split('.')[0]) ? `the ${v} module runs code given in its arguments or on stdin` : null),
  },
  {
    match: /^(?:node|nodejs|tsx|ts-node|ts-node-esm|ts-node-script)$/,
    inlineShort: 'epri',
    valuedShort: 'C',
    flagShort: 'vhc',
    inlineLong: ['eval', 'print', 'import', 'require', 'loader', 'experimental-loader', 'env-file', 'env-file-if-exists', 'interactive'],
    flagLong: [
      'version',
      'help',
      'check',
      'test',
      'watch',
      'no-warnings',
      'trace-warnings',
      'enable-source-maps',
      'experimental-strip-types',
      'experimental-transform-types',
      'no-experimental-strip-types',
      'experimental-vm-modules',
      'expose-gc',
      'trace-uncaught',
      'pending-deprecation',
      'throw-deprecation',
      'preserve-symlinks',
      'experimental-test-coverage',
      'test-only',
      'no-deprecation',
      'abort-on-uncaught-exception',
      'frozen-intrinsics',
      'experimental-wasm-modules',
      'experimental-sqlite',
      'experimental-websocket',
      'experimental-require-module',
      'trace-sync-io',
      'trace-exit',
      'trace-deprecation',
      'zero-fill-buffers',
      'experimental-permission',
      'permission',
      'allow-child-process',
      'allow-worker',
      'allow-wasi',
      'allow-addons',
      'watch-preserve-output',
      'test-update-snapshots',
      'experimental-test-snapshots',
      'experimental-test-module-mocks',
      'report-on-fatalerror',
      'report-uncaught-exception',
      'report-on-signal',
      'report-compact',
      'cpu-prof',
      'heap-prof',
      'jitless',
      'verify-base-objects',
      'no-addons',
      'no-global-search-paths',
      'no-experimental-fetch',
      'no-experimental-global-navigator',
      'force-fips',
      'enable-fips',
      'insecure-http-parser',
      'node-memory-debug',
      'experimental-network-inspection',
      'experimental-print-required-tla',
      'entry-url',
      'experimental-eventsource',
      'experimental-webstorage',
    ],
    valuedLong: [
      'title',
      'conditions',
      'input-type',
      'watch-path',
      'test-name-pattern',
      'test-skip-pattern',
      'test-reporter',
      'test-reporter-destination',
      'disable-warning',
      'openssl-config',
      'icu-data-dir',
      'redirect-warnings',
      'report-dir',
      'report-directory',
      'report-filename',
      'report-signal',
      'diagnostic-dir',
      'cpu-prof-dir',
      'cpu-prof-name',
      'cpu-prof-interval',
      'heap-prof-dir',
      'heap-prof-name',
      'heap-prof-interval',
      'heapsnapshot-signal',
      'heapsnapshot-near-heap-limit',
      'run',
      'test-shard',
      'test-concurrency',
      'test-timeout',
      'test-isolation',
      'unhandled-rejections',
      'dns-result-order',
      'experimental-config-file',
      'localstorage-file',
      'inspect-port',
      'debug-port',
      'inspect-publish-uid',
      'secure-heap',
      'secure-heap-min',
      'snapshot-blob',
      'build-snapshot-config',
      'tls-cipher-list',
      'tls-keylog',
      'trace-event-categories',
      'trace-event-file-pattern',
      'use-largepages',
      'v8-pool-size',
      'max-http-header-size',
      'experimental-default-type',
      'allow-fs-read',
      'allow-fs-write',
      'disable-proto',
      'experimental-sea-config',
      'watch-kill-signal',
      'test-coverage-include',
      'test-coverage-exclude',
      'test-coverage-branches',
      'test-coverage-functions',
      'test-coverage-lines',
      'stack-size',
      'max-old-space-size',
      'max-semi-space-size',
      'stack-trace-limit',
      'network-family-autoselection-attempt-timeout',
    ],
    stopAtScript: true,
    underscores: true,
    dataUrls: true,
    standalone: /^(?:--(?:test|run|build-snapshot)(?:=.*)?|-v|-h|-c|--check)$/,
    stdinCode: NO_SCRIPT,
  },
  {
    match: /^bun$/,
    inlineShort: 'epri',
    valuedShort: '',
    flagShort: 'vh',
    inlineLong: ['eval', 'print', 'preload', 'require', 'import'],
    inlineSubcommands: ['repl'],
    stopAtScript: false,
    dataUrls: true,
  },
  // `deno` without a subcommand starts its REPL.
  {
    match: /^deno$/,
    inlineShort: '',
    valuedShort: '',
    flagShort: '',
    inlineSubcommands: ['eval', 'repl'],
    inlineLong: ['eval'],
    stopAtScript: false,
    dataUrls: true,
    standalone: /^-[Vh]$/,
    stdinCode: NO_SCRIPT,
  },
  {
    match: /^perl[\d.]*$/,
    inlineShort: 'eE',
    valuedShort: 'MmIiDdxF',
    digitsShort: 'l0C',
    flagShort: 'acnpsStTuUvVwWXhg',
    stopAtScript: true,
    standalone: /^-(?:v|V|h|V:.*)$/,
    stdinCode: NO_SCRIPT,
    valueCheck: (opt, v) => (/^-[Mm]/.test(opt) && !PERL_MODULE.test(v) ? 'its module name carries Perl code' : null),
  },
  {
    match: /^(?:ruby[\d.]*|jruby|truffleruby)$/,
    inlineShort: 'e',
    valuedShort: 'rIECFKxiWX',
    digitsShort: '0T',
    flagShort: 'acdhlnpsSvwy',
    stopAtScript: true,
    standalone: /^(?:-v|-h|--copyright)$/,
    stdinCode: NO_SCRIPT,
    flagLong: ['version', 'verbose', 'help', 'yjit', 'jit', 'copyright', 'disable-gems'],
    valuedLong: ['encoding', 'external-encoding', 'internal-encoding', 'enable', 'disable', 'dump', 'backtrace-limit', 'crash-report', 'parser'],
  },
  {
    match: /^php[\d.]*$/,
    inlineShort: 'rRBEa',
    valuedShort: 'cdfzFtS',
    flagShort: 'hilmnqsvwHe',
    stopAtScript: true,
    standalone: /^(?:-[vhim]|--info|--modules)$/,
    stdinCode: NO_SCRIPT,
    inlineLong: ['run', 'process-begin', 'process-code', 'process-end', 'interactive'],
    flagLong: ['help', 'version', 'info', 'modules', 'no-php-ini', 'no-chdir', 'syntax-check', 'hide-args', 'strip'],
    valuedLong: ['define', 'php-ini', 'file', 'zend-extension', 'process-file', 'docroot', 'server', 'rf', 'rc', 're', 'rz', 'ri'],
    valueCheck: (opt, v) => {
      if ((opt === '-d' || opt === '--define') && PHP_INI_CODE.test(v)) return 'this ini setting makes PHP include code before or after the script';
      // Not stdin code: a server that runs any workspace PHP file (or the router script) for every request, until the timeout.
      if (opt === '-S' || opt === '--server')
        return "it starts PHP's built-in web server, which runs the workspace's PHP files for each request instead of one script";
      return null;
    },
  },
  {
    match: /^(?:sh|bash|dash|zsh|ksh|ksh93|mksh|pdksh|lksh|oksh|ash|yash|posh|rbash)$/,
    inlineShort: 'cis',
    valuedShort: '',
    nextArgShort: 'oO',
    flagShort: 'abefhklmnprtuvxBCEHPT',
    stopAtScript: true,
    plusOptions: true,
    valuedLong: ['rcfile', 'init-file'],
    stdinCode: NO_SCRIPT,
    flagLong: [
      'login',
      'noprofile',
      'norc',
      'posix',
      'restricted',
      'verbose',
      'version',
      'help',
      'debugger',
      'dump-strings',
      'dump-po-strings',
      'noediting',
      'pretty-print',
    ],
  },
  {
    match: /^fish$/,
    inlineShort: 'ciC',
    valuedShort: 'dDf',
    flagShort: 'lnNpPv',
    inlineLong: ['command', 'init-command', 'interactive'],
    stopAtScript: true,
    standalone: /^-[vh]$/,
    stdinCode: NO_SCRIPT,
  },
  // Rscript without a file prints its usage; denied all the same, like every interpreter without a script.
  { match: /^Rscript$/, ...R_OPTIONS, stdinCode: NO_SCRIPT },
  // R ignores positional arguments (`R x.R` reads stdin): only `-f FILE`, `--file=FILE` or `R CMD …` give it a program.
  { match: /^R$/, ...R_OPTIONS, stdinCode: { when: 'no-script', script: /^CMD$/, scriptOptions: ['-f', '--file'] } },
  // elixir scans every argument: `elixir -S mix run -e CODE` hands `-e` to mix, which evaluates it.
  // Without a script elixir prints its usage; iex runs its files, then a shell on stdin.
  { match: /^elixir$/, ...ELIXIR_OPTIONS, stopAtScript: false },
  { match: /^iex$/, ...ELIXIR_OPTIONS, stopAtScript: false, stdinCode: ALWAYS },
  // erl starts a shell on stdin unless told not to.
  {
    match: /^erl$/,
    inlineShort: '',
    valuedShort: '',
    flagShort: '',
    wordOptions: true,
    inlineWord: ['eval', 's', 'run', 'S', 'extra'],
    stopAtScript: false,
    stdinCode: { ...ALWAYS, safe: ['-noshell', '-noinput', '-detached'] },
  },
  // kotlinc without a source file is a REPL (checked: options alone, `-d out`, `-cp .` all read stdin); the
  // `kotlin` runner's newer versions start it too. -X/-J/-D options carry their value attached.
  {
    match: /^(?:kotlin|kotlinc|kotlinc-jvm)$/,
    inlineShort: '',
    valuedShort: '',
    flagShort: '',
    wordOptions: true,
    inlineWord: ['e', 'expression'],
    valuedWord: KOTLIN_VALUED,
    flagWord: KOTLIN_FLAGS,
    standalone: /^-(?:X|h)$/,
    stopAtScript: false,
    stdinCode: { when: 'no-script', strict: true },
  },
  { match: /^(?:lua[\d.]*|luajit)$/, inlineShort: 'ei', valuedShort: 'ljb', flagShort: 'vEW', stopAtScript: true, standalone: /^-v$/, stdinCode: NO_SCRIPT },
  {
    match: /^julia$/,
    inlineShort: 'eEi',
    valuedShort: 'LJCpOtgdm',
    flagShort: 'hvqh',
    inlineLong: ['eval', 'print', 'interactive'],
    stopAtScript: true,
    standalone: /^-[vh]$/,
    stdinCode: NO_SCRIPT,
  },
  { match: /^groovy$/, inlineShort: 'e', valuedShort: 'cDl', flagShort: 'hvdn', stopAtScript: true, standalone: /^-[vh]$/, stdinCode: NO_SCRIPT },
  { match: /^groovysh$/, inlineShort: 'e', valuedShort: 'cDl', flagShort: 'hvdqT', stopAtScript: false, standalone: /^-[vh]$/, stdinCode: ALWAYS },
  // scala (2's runner and scala-cli) without a script or with `repl` is a REPL; `-i FILE` preloads a file into it.
  {
    match: /^scala$/,
    inlineShort: '',
    valuedShort: '',
    flagShort: '',
    wordOptions: true,
    inlineWord: ['e'],
    inlineSubcommands: ['repl'],
    stopAtScript: false,
    valuedWord: [
      'cp',
      'classpath',
      'd',
      'encoding',
      'sourcepath',
      'bootclasspath',
      'extdirs',
      'javabootclasspath',
      'javaextdirs',
      'release',
      'i',
      'howtorun',
      'S',
      'M',
      'J',
      'O',
      'r',
      'o',
    ],
    valuedLong: [
      'dep',
      'dependency',
      'main-class',
      'scala-version',
      'jvm',
      'java-opt',
      'java-prop',
      'repository',
      'java-home',
      'server',
      'workspace',
      'scalac-option',
      'compilation-output',
      'output',
    ],
    stdinCode: NO_SCRIPT,
  },
  // jshell runs its load files, then reads snippets from stdin (checked: `jshell s.jsh` runs stdin code).
  { match: /^jshell$/, inlineShort: '', valuedShort: '', flagShort: '', stopAtScript: false, stdinCode: ALWAYS },
  // jrunscript's positional arguments are the script's arguments: only `-f FILE` gives it a program.
  {
    match: /^jrunscript$/,
    inlineShort: '',
    valuedShort: '',
    flagShort: '',
    wordOptions: true,
    inlineWord: ['e'],
    valuedWord: ['cp', 'classpath', 'l', 'encoding', 'f'],
    flagWord: /^-(?:[JD].*|q|\?|help)$/,
    standalone: /^-(?:q|\?|help)$/,
    stopAtScript: false,
    stdinCode: { when: 'no-script', script: NO_POSITIONAL_SCRIPT, scriptOptions: ['-f'], strict: true },
  },
  // irb with a file reads the file instead of stdin (checked).
  {
    match: /^irb[\d.]*$/,
    inlineShort: '',
    valuedShort: 'rIE',
    digitsShort: 'W',
    flagShort: 'fdUwvh',
    stopAtScript: true,
    standalone: /^-[vh]$/,
    stdinCode: NO_SCRIPT,
    flagLong: [
      'version',
      'help',
      'echo',
      'noecho',
      'inspect',
      'noinspect',
      'readline',
      'noreadline',
      'reline',
      'noreline',
      'multiline',
      'nomultiline',
      'singleline',
      'nosingleline',
      'inf-ruby-mode',
      'simple-prompt',
      'noprompt',
      'single-irb',
      'tracer',
      'verbose',
      'noverbose',
      'colorize',
      'nocolorize',
      'autocomplete',
      'noautocomplete',
      'echo-on-assignment',
      'noecho-on-assignment',
      'truncate-echo-on-assignment',
      'noscript',
      'script',
    ],
    valuedLong: ['context-mode', 'prompt', 'prompt-mode', 'back-trace-limit', 'extra-doc-dir', 'irb_debug'],
  },
  // tclsh and wish read commands from stdin without a script file, also when the first argument is an unknown option (checked).
  {
    match: /^(?:tclsh|wish)[\d.]*$/,
    inlineShort: '',
    valuedShort: '',
    flagShort: '',
    wordOptions: true,
    valuedWord: ['encoding', 'display', 'geometry', 'name', 'use', 'visual', 'colormap'],
    flagWord: /^-sync$/,
    stopAtScript: true,
    stdinCode: { when: 'no-script', strict: true },
  },
  // ghci (and `ghc --interactive`) loads its modules, then reads expressions from stdin; runghc without a module reads it from stdin.
  {
    match: /^ghci(?:-[\d.]+)?$/,
    inlineShort: '',
    valuedShort: '',
    flagShort: '',
    wordOptions: true,
    inlineWord: ['e'],
    stopAtScript: false,
    stdinCode: ALWAYS,
  },
  {
    match: /^ghc(?:-[\d.]+)?$/,
    inlineShort: '',
    valuedShort: '',
    flagShort: '',
    wordOptions: true,
    inlineWord: ['e'],
    stdinOptions: ['--interactive'],
    stopAtScript: false,
  },
  {
    match: /^(?:runghc|runhaskell)(?:-[\d.]+)?$/,
    inlineShort: '',
    valuedShort: '',
    flagShort: '',
    wordOptions: true,
    inlineWord: ['e'],
    stopAtScript: true,
    valuedWord: ['f', 'package', 'package-id', 'hide-package', 'package-db', 'o', 'odir', 'hidir', 'outputdir', 'x'],
    flagWord: /^-(?:[OWXDUIL].*|f.+|i.*|d.+)$/,
    valueCheck: (opt) => (opt === '-f' ? 'it runs another program as the Haskell compiler' : null),
    stdinCode: { when: 'no-script', strict: true },
  },
  // guile: `-s FILE` or a file runs it and exits; `-l FILE` loads it and then starts the REPL.
  {
    match: /^guile[\d.]*$/,
    inlineShort: '',
    valuedShort: '',
    flagShort: '',
    wordOptions: true,
    inlineWord: ['c'],
    valuedWord: ['l', 'e', 'x', 'L', 'C', 's'],
    flagWord: /^-(?:ds|q|h|v)$/,
    flagLong: ['debug', 'no-debug', 'auto-compile', 'fresh-auto-compile', 'no-auto-compile', 'help', 'version', 'listen'],
    standalone: /^-[vh]$/,
    stopAtScript: true,
    stdinCode: { when: 'no-script', scriptOptions: ['-s'], strict: true },
  },
  // ocaml: the toplevel reads stdin unless a script file follows the object files (`.cmo`/`.cma`) it loads; `-stdin` reads the script from stdin.
  {
    match: /^ocaml$/,
    inlineShort: '',
    valuedShort: '',
    flagShort: '',
    wordOptions: true,
    stdinOptions: ['-stdin'],
    valuedWord: ['I', 'init', 'open', 'ppx', 'w', 'warn-error', 'color', 'error-style', 'alert', 'args', 'args0'],
    flagWord: /^-(?:no\w+|version|vnum|safe-string|unsafe\w*|rectypes|principal|short-paths|strict-\w+|absname|labels|help)$/,
    standalone: /^-vnum$/,
    stopAtScript: true,
    stdinCode: { when: 'no-script', script: /^(?!.*\.(?:cmo|cma|cmx|cmxa|cmxs|o|a|so)$)/, strict: true },
  },
  // sbcl's REPL reads stdin unless `--script FILE` runs a file, or `--quit`/`--non-interactive` end it after the other options.
  {
    match: /^sbcl$/,
    inlineShort: '',
    valuedShort: '',
    flagShort: '',
    inlineLong: ['eval'],
    stopAtScript: false,
    endOptions: ['--end-toplevel-options'],
    valuedLong: ['core', 'dynamic-space-size', 'control-stack-size', 'tls-limit', 'sysinit', 'userinit', 'load', 'script'],
    flagLong: [
      'noinform',
      'help',
      'version',
      'no-sysinit',
      'no-userinit',
      'disable-debugger',
      'noprint',
      'quit',
      'non-interactive',
      'disable-ldb',
      'lose-on-corruption',
      'end-runtime-options',
      'merge-core-pages',
      'no-merge-core-pages',
      'debug-environment',
    ],
    stdinCode: { when: 'no-script', script: NO_POSITIONAL_SCRIPT, scriptOptions: ['--script'], safe: ['--quit', '--non-interactive'], strict: true },
  },
  // .NET: F# Interactive (`dotnet fsi`, its assembly, mono's fsharpi) and C# script runners read stdin without a script.
  {
    match: /^(?:fsi|fsharpi)$/,
    dotnetCommand: /^fsi$|(?:^|\/)fsi\.dll$/i,
    inlineShort: '',
    valuedShort: '',
    flagShort: '',
    valuesAttached: true,
    stopAtScript: true,
    stdinCode: { when: 'no-script', safe: ['--exec'] },
  },
  {
    match: /^csi$/,
    dotnetCommand: /(?:^|\/)csi\.dll$/i,
    inlineShort: '',
    valuedShort: '',
    flagShort: '',
    valuesAttached: true,
    slashOptions: true,
    stdinOptions: ['-i', '/i', '--interactive'],
    stopAtScript: true,
    stdinCode: NO_SCRIPT,
  },
  {
    match: /^dotnet-script$/,
    dotnetCommand: /^script$/,
    inlineShort: '',
    valuedShort: 'cs',
    flagShort: 'd',
    valuedLong: ['configuration', 'sources'],
    inlineSubcommands: ['eval'],
    stdinOptions: ['-i', '--interactive'],
    stopAtScript: true,
    stdinCode: NO_SCRIPT,
  },
  // mono's C# shell runs its files, then reads stdin; `--attach` injects it into another process.
  {
    match: /^csharp$/,
    inlineShort: '',
    valuedShort: '',
    flagShort: '',
    wordOptions: true,
    inlineWord: ['e'],
    inlineLong: ['attach'],
    valuesAttached: true,
    stopAtScript: false,
    stdinCode: ALWAYS,
  },
  // dc's `!` runs a shell command; without -e, -f or files it reads stdin. (bc's language runs no programs.)
  {
    match: /^dc$/,
    inlineShort: 'e',
    inlineLong: ['expression'],
    valuedShort: 'f',
    valuedLong: ['file'],
    flagShort: 'hV',
    flagLong: ['help', 'version'],
    standalone: /^-[hV]$/,
    stopAtScript: false,
    stdinCode: { when: 'no-script', scriptOptions: ['-f', '--file'] },
  },
  // Editors read their commands from stdin when it is not a terminal, and `!cmd` runs a shell command
  // (checked: `vim f`, `ex -s f`, `ed -s f`). `ed -r` is restricted: no shell commands.
  // `-c`/`--cmd`/`+cmd` run editor commands; `-e`/`-E` read ex commands from stdin.
  {
    match: /^(?:vim|vi|nvim|view|ex|gvim|rvim|vimdiff|evim)$/,
    inlineShort: 'ceE',
    valuedShort: 'STtiuUwWrq',
    flagShort: 'bdDhlmMnNRsyZAFgHLfo',
    inlineLong: ['cmd'],
    plusInline: true,
    standalone: /^-h$/,
    stopAtScript: false,
    stdinCode: ALWAYS,
  },
  {
    match: /^ed$/,
    inlineShort: '',
    valuedShort: 'p',
    valuedLong: ['prompt'],
    flagShort: 'EGlrsv',
    stopAtScript: false,
    stdinCode: { ...ALWAYS, safe: ['-r', '--restricted'] },
  },
  {
    match: /^emacs$/,
    inlineShort: '',
    valuedShort: '',
    flagShort: '',
    wordOptions: true,
    inlineLong: ['eval', 'load', 'funcall', 'execute'],
    inlineWord: ['eval', 'l', 'load', 'f', 'funcall', 'execute'],
    stopAtScript: false,
  },
  // PowerShell reads commands from stdin without -File, a script or -Command; its own parser is screenPowershell.
  { match: /^(?:pwsh|powershell)(?:\.exe)?$/i, inlineShort: '', valuedShort: '', flagShort: '', stopAtScript: true, stdinCode: NO_SCRIPT, powershell: true },
];

export function interpreterScreen(base: string): Screen | undefined {
  const spec = base === 'dotnet' ? undefined : INTERPRETERS.find((s) => s.match?.test(base));
  const screen: Screen | undefined =
    base === 'dotnet'
      ? screenDotnet
      : spec?.powershell
        ? (args, ctx) => screenPowershell(spec, args, ctx)
        : spec
          ? (args, ctx) => screenInterpreter(spec, args, ctx)
          : undefined;
  // In code mode the agent runs `<exe> <file> <args…>`: the arguments belong to the program.
  return screen && ((args, ctx) => (ctx.allowInlineCode || ctx.codeMode ? null : screen(args, ctx)));
}

/**
 * Whether the table knows `base` as a program that runs code it is given (inline, on stdin, or
 * through `dotnet`): the `open` preset permits inline code for exactly these.
 */
export function isInterpreter(base: string): boolean {
  return base === 'dotnet' || INTERPRETERS.some((s) => s.match?.test(base));
}

/** The stdin rule's entries, for tests and documentation: what each matches and when it reads code from stdin. */
export const STDIN_CODE_TABLE: ReadonlyArray<{ match?: RegExp; dotnetCommand?: RegExp; when: StdinCode['when'] }> = INTERPRETERS.flatMap((s) =>
  s.stdinCode ? [{ match: s.match, dotnetCommand: s.dotnetCommand, when: s.stdinCode.when }] : [],
);

/** Arguments that print something and exit: an interpreter given one needs no script. */
const INFO = new Set(['--version', '--help', '-version', '-help', '-?']);

const FROM_STDIN = 'it reads the program from stdin, which the policy cannot screen';
export const NO_SCRIPT_REASON = 'no script is given, so it would read the program from stdin';
export const AFTER_FILES_REASON = 'it reads more program from stdin after the files it is given (a REPL follows them), which the policy cannot screen';

/** What a scan saw, for the one stdin rule. */
interface StdinSeen {
  /** A script was given: a positional the program takes as its script, or a script option's value. */
  given: boolean;
  /** An option after which stdin cannot carry a program (`erl -noshell`). */
  safe: boolean;
  /** An argument that prints something and exits (`--version`). */
  info: boolean;
}

/**
 * The one rule for code on stdin: a program that reads its program from stdin when no script is
 * given (`when: 'no-script'`), or also after its files (`when: 'always'`), is denied with the same
 * reason for every program; `argumentRules[exe].allowInlineCode` permits it like inline code.
 */
function stdinCodeReason(code: StdinCode | undefined, seen: StdinSeen, shown: string, ctx: ScreenContext): string | null {
  if (!code || seen.safe || seen.info) return null;
  if (!seen.given) return inlineDenied(shown || '(none)', ctx, NO_SCRIPT_REASON);
  return code.when === 'always' ? inlineDenied(shown, ctx, AFTER_FILES_REASON) : null;
}

const SLASH_OPTION = /^\/[A-Za-z?][\w-]*(?:[:+-].*)?$/s;

function screenInterpreter(s: Interpreter, args: readonly string[], ctx: ScreenContext, lead = ''): string | null {
  // How many coming positional arguments are option values rather than the script: `certain`
  // for options known to take one, `unsure` for options of unknown arity. Only positionals pay
  // them off; an option-looking argument is screened as an option either way, so the counts can
  // only make the scan go further (stricter), never stop early at a value.
  let certain = 0;
  let unsure = 0;
  let unsurePaid = 0;
  let positionals = 0;
  const code = s.stdinCode;
  const seen: StdinSeen = { given: false, safe: false, info: false };
  const stdin = (a: string) => inlineDenied(a, ctx, FROM_STDIN);
  /** An option's value: a script option's value is the script (or stdin); then the option's own value check. */
  const value = (opt: string, v: string | undefined, shown: string): string | null => {
    if (v === undefined) return null;
    if (code?.scriptOptions?.includes(opt)) {
      if (STDIN.test(v)) return stdin(shown);
      if (!v.startsWith('-')) seen.given = true;
    }
    const bad = s.valueCheck?.(opt, v);
    return bad ? inlineDenied(shown, ctx, bad) : null;
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (s.dataUrls && /^data:|=data:/i.test(a)) return inlineDenied(a, ctx, 'it runs code from a data: URL');
    if (STDIN.test(a) || s.stdinOptions?.includes(a)) return stdin(a);
    if (s.endOptions?.includes(a)) break;
    if (code?.safe?.includes(a)) seen.safe = true;
    if (INFO.has(a) || s.standalone?.test(a)) seen.info = true;
    if (a === '--') {
      if (!s.stopAtScript || certain + unsure > 0) continue;
      const script = args[i + 1];
      if (script === undefined) break;
      if (STDIN.test(script)) return stdin(script);
      if (!code?.script || code.script.test(script)) positionals++;
      break;
    }
    const long = longOption(a);
    if (long) {
      const name = s.underscores ? long.name.replace(/_/g, '-') : long.name;
      if (s.inlineLong?.includes(name)) return inlineDenied(a, ctx);
      if (s.valuesAttached) continue;
      if (long.value !== undefined) {
        const bad = value(`--${name}`, long.value, a);
        if (bad) return bad;
      } else {
        const valued = s.valuedLong?.includes(name);
        // A value check also looks at the next argument of an option it does not know to take one.
        const bad = valued || s.valueCheck ? value(`--${name}`, args[i + 1], `${a} ${args[i + 1]}`) : null;
        if (bad) return bad;
        if (valued) certain++;
        else if (!s.flagLong?.includes(name) && !name.startsWith('no-')) unsure++;
      }
      continue;
    }
    if (s.inlineWord && a.startsWith('-') && s.inlineWord.includes(a.slice(1))) return inlineDenied(a, ctx);
    if (s.slashOptions && SLASH_OPTION.test(a)) continue;
    const cluster = shortCluster(a) ?? (s.plusOptions && /^\+[A-Za-z]/.test(a) ? a.slice(1) : null);
    if (cluster !== null) {
      if (s.valuesAttached) continue;
      if (s.wordOptions) {
        if (s.valuedWord?.includes(cluster)) {
          const bad = value(a, args[i + 1], `${a} ${args[i + 1]}`);
          if (bad) return bad;
          certain++;
        } else if (!s.flagWord?.test(a)) unsure++; // arity unknown
        continue;
      }
      for (let j = 0; j < cluster.length; j++) {
        const c = cluster[j];
        if (s.inlineShort.includes(c)) return inlineDenied(a, ctx);
        if (s.valuedShort.includes(c)) {
          // getopt style: the rest of the cluster is the value, else the next argument is.
          const attached = cluster.slice(j + 1);
          const bad = value(`-${c}`, attached !== '' ? attached : args[i + 1], attached !== '' ? a : `${a} ${args[i + 1]}`);
          if (bad) return bad;
          if (s.endShort?.includes(c)) return null;
          if (attached === '') certain++;
          break;
        }
        if (s.nextArgShort?.includes(c)) {
          certain++;
          continue;
        }
        if (s.digitsShort?.includes(c)) {
          while (j + 1 < cluster.length && /[0-9a-fA-Fx]/.test(cluster[j + 1]) && !s.inlineShort.includes(cluster[j + 1])) j++;
          continue;
        }
        if (!s.flagShort.includes(c) && j === cluster.length - 1) unsure++;
      }
      continue;
    }
    // A positional argument.
    if (s.plusInline && /^\+\D/.test(a)) return inlineDenied(a, ctx, 'it runs an editor command');
    if (positionals === 0 && s.inlineSubcommands?.includes(a)) return inlineDenied(a, ctx);
    if (certain > 0) {
      certain--;
      continue;
    }
    if (unsure > 0) {
      unsure--;
      unsurePaid++;
      continue;
    }
    // Not the script (R's ignored arguments, ocaml's object files): options may still follow.
    if (code?.script && !code.script.test(a)) continue;
    positionals++;
    if (s.stopAtScript) break;
  }
  // When an option of unknown arity may have taken the script as its value, give it the benefit
  // unless the entry is strict (its option list is complete enough that the doubt favours stdin).
  if (positionals > 0 || (unsurePaid > 0 && !code?.strict)) seen.given = true;
  return stdinCodeReason(code, seen, [lead, ...args].filter(Boolean).join(' '), ctx);
}

/** Options of the dotnet host that take the next argument; they come before the command. */
const DOTNET_VALUED = new Set([
  '--additionalprobingpath',
  '--additional-deps',
  '--depsfile',
  '--runtimeconfig',
  '--fx-version',
  '--roll-forward',
  '--roll-forward-on-no-candidate-fx',
]);

/**
 * `dotnet <command>` and `dotnet [exec] <assembly>`: a command or assembly the table knows (`fsi`,
 * `script`, `…/csi.dll`) is screened as that program with the arguments after it.
 */
const screenDotnet: Screen = (args, ctx) => {
  let i = 0;
  const skipOptions = () => {
    while (i < args.length && args[i].startsWith('-') && args[i] !== '-') i += DOTNET_VALUED.has(args[i]) ? 2 : 1;
  };
  skipOptions();
  if (args[i] === 'exec') {
    i++;
    skipOptions();
  }
  const command = args[i];
  if (command === undefined) return null;
  const spec = INTERPRETERS.find((s) => s.dotnetCommand?.test(command));
  return spec ? screenInterpreter(spec, args.slice(i + 1), ctx, args.slice(0, i + 1).join(' ')) : null;
};

const PS_VALUED = [
  'configurationfile',
  'configurationname',
  'custompipename',
  'executionpolicy',
  'inputformat',
  'outputformat',
  'settingsfile',
  'windowstyle',
  'workingdirectory',
  'psconsolefile',
  'version',
  'encodedarguments',
];
const PS_VALUED_ALIASES = ['ep', 'ex', 'wd', 'of', 'o', 'if', 'inp', 'config', 'settings', 'w', 'v', 'ea'];
const PS_FLAGS = [
  'nologo',
  'noprofile',
  'noninteractive',
  'interactive',
  'sta',
  'mta',
  'login',
  'help',
  'noprofileloadtime',
  'nop',
  'nol',
  'noni',
  'l',
  'h',
  '?',
];

/**
 * PowerShell: `-Command`/`-EncodedCommand`/`-CommandWithArgs`, case-insensitive and abbreviable;
 * `-NoExit` keeps it reading stdin after the script; without `-File` or a script it reads stdin.
 */
function screenPowershell(s: Interpreter, args: readonly string[], ctx: ScreenContext): string | null {
  const seen: StdinSeen = { given: false, safe: false, info: false };
  let value = false;
  for (const a of args) {
    if (a === '-') return inlineDenied(a, ctx, FROM_STDIN);
    if (INFO.has(a) || /^-(?:v|version|h|help|\?)$/i.test(a)) seen.info = true;
    if (!/^[-/]/.test(a)) {
      if (value) {
        value = false;
        continue;
      }
      seen.given = true; // the first positional is the script (-File is the default parameter)
      break;
    }
    value = false;
    const name = a.slice(1).toLowerCase().split(':')[0];
    if (name === '') continue;
    if (['command', 'encodedcommand', 'commandwithargs'].some((w) => w.startsWith(name)) || ['ec', 'enc', 'cwa'].includes(name)) return inlineDenied(a, ctx);
    if (name.length >= 3 && 'noexit'.startsWith(name))
      return inlineDenied(a, ctx, 'it reads commands from stdin after the script, which the policy cannot screen');
    if ('file'.startsWith(name)) {
      seen.given = true; // -File script: the rest are the script's arguments
      break;
    }
    // Unknown or abbreviated parameters may take the next argument: it is not taken as the script.
    value = !a.includes(':') && (PS_VALUED_ALIASES.includes(name) || PS_VALUED.some((p) => p.startsWith(name)) || !PS_FLAGS.includes(name));
  }
  return stdinCodeReason(s.stdinCode, seen, args.join(' '), ctx);
}
