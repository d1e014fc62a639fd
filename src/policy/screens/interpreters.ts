/**
 * Interpreters' inline-code options (`python -c`, `node -e/--eval/-p/--import/-r`, `perl -e/-E`,
 * `ruby -e`, `php -r`, `bash -c`, `Rscript -e`, `elixir -e/--eval`, …) and programs read from
 * stdin (`-`, `/dev/stdin`): denied unless `argumentRules[exe].allowInlineCode`. Allowing
 * `python3` is meant to run the workspace's scripts, not whatever code the caller sends.
 *
 * Parsing follows each interpreter's rule that options end at the script name (what follows is
 * the script's own arguments: `python3 manage.py -c x` is fine). To never mistake an option's
 * value for the script, an option whose value may be the next argument makes the scan continue
 * past that argument instead of stopping; clustered short options (`-pe`, `-lne`) are split.
 */
import { inlineDenied, type Screen, type ScreenContext } from './common.ts';
import { longOption, shortCluster } from './options.ts';

interface Interpreter {
  match: RegExp;
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
}

const STDIN = /^(?:-|\/dev\/stdin|\/dev\/fd\/0|\/proc\/(?:self|thread-self|\d+)\/fd\/0)$/;

/** Modules that evaluate text given on the command line or read code from stdin (`python -m timeit 'code'`). */
const PYTHON_CODE_MODULES = new Set(['timeit', 'code', 'pdb', 'asyncio', 'IPython', 'idlelib', 'ptpython', 'bpython', '_pyrepl', 'pyrepl']);
const PERL_MODULE = /^-?[A-Za-z_][\w:]*(?:=.*)?$/s;
const PHP_INI_CODE = /^\s*(?:auto_prepend_file|auto_append_file|allow_url_include|allow_url_fopen)\s*=/i;

const INTERPRETERS: Interpreter[] = [
  {
    match: /^(?:python[\d.]*|pypy[\d.]*)$/, inlineShort: 'ci', valuedShort: 'cmWXQ', endShort: 'm',
    flagShort: 'bBdEhIOqsSuvVxRP?', flagLong: ['help', 'version', 'help-env', 'help-xoptions', 'help-all'], valuedLong: ['check-hash-based-pycs'], stopAtScript: true, standalone: /^(?:-V+|-h|--help-\w+)$/,
    valueCheck: (opt, v) => (opt === '-m' && PYTHON_CODE_MODULES.has(v.split('.')[0]) ? `the ${v} module runs code given in its arguments or on stdin` : null),
  },
  {
    match: /^(?:node|nodejs|tsx|ts-node|ts-node-esm|ts-node-script)$/, inlineShort: 'epri', valuedShort: 'C', flagShort: 'vhc',
    inlineLong: ['eval', 'print', 'import', 'require', 'loader', 'experimental-loader', 'env-file', 'env-file-if-exists', 'interactive'],
    flagLong: ['version', 'help', 'check', 'test', 'watch', 'no-warnings', 'trace-warnings', 'enable-source-maps', 'experimental-strip-types',
      'experimental-transform-types', 'no-experimental-strip-types', 'experimental-vm-modules', 'expose-gc', 'trace-uncaught', 'pending-deprecation',
      'throw-deprecation', 'preserve-symlinks', 'experimental-test-coverage', 'test-only', 'no-deprecation', 'abort-on-uncaught-exception',
      'frozen-intrinsics', 'experimental-wasm-modules', 'experimental-sqlite', 'experimental-websocket', 'experimental-require-module', 'trace-sync-io',
      'trace-exit', 'trace-deprecation', 'zero-fill-buffers', 'experimental-permission', 'permission', 'allow-child-process', 'allow-worker', 'allow-wasi',
      'allow-addons', 'watch-preserve-output', 'test-update-snapshots', 'experimental-test-snapshots', 'experimental-test-module-mocks', 'report-on-fatalerror',
      'report-uncaught-exception', 'report-on-signal', 'report-compact', 'cpu-prof', 'heap-prof', 'jitless', 'verify-base-objects', 'no-addons',
      'no-global-search-paths', 'no-experimental-fetch', 'no-experimental-global-navigator', 'force-fips', 'enable-fips', 'insecure-http-parser', 'node-memory-debug',
      'experimental-network-inspection', 'experimental-print-required-tla', 'entry-url', 'experimental-eventsource', 'experimental-webstorage'],
    valuedLong: ['title', 'conditions', 'input-type', 'watch-path', 'test-name-pattern', 'test-skip-pattern', 'test-reporter', 'test-reporter-destination',
      'disable-warning', 'openssl-config', 'icu-data-dir', 'redirect-warnings', 'report-dir', 'report-directory', 'report-filename', 'report-signal', 'diagnostic-dir',
      'cpu-prof-dir', 'cpu-prof-name', 'cpu-prof-interval', 'heap-prof-dir', 'heap-prof-name', 'heap-prof-interval', 'heapsnapshot-signal', 'heapsnapshot-near-heap-limit',
      'run', 'test-shard', 'test-concurrency', 'test-timeout', 'test-isolation', 'unhandled-rejections', 'dns-result-order', 'experimental-config-file', 'localstorage-file',
      'inspect-port', 'debug-port', 'inspect-publish-uid', 'secure-heap', 'secure-heap-min', 'snapshot-blob', 'build-snapshot-config', 'tls-cipher-list', 'tls-keylog',
      'trace-event-categories', 'trace-event-file-pattern', 'use-largepages', 'v8-pool-size', 'max-http-header-size', 'experimental-default-type', 'allow-fs-read',
      'allow-fs-write', 'disable-proto', 'experimental-sea-config', 'watch-kill-signal', 'test-coverage-include', 'test-coverage-exclude', 'test-coverage-branches',
      'test-coverage-functions', 'test-coverage-lines', 'stack-size', 'max-old-space-size', 'max-semi-space-size', 'stack-trace-limit', 'network-family-autoselection-attempt-timeout'],
    stopAtScript: true, underscores: true, dataUrls: true, standalone: /^(?:--(?:test|run|build-snapshot)(?:=.*)?|-v|-h|-c|--check)$/,
  },
  {
    match: /^bun$/, inlineShort: 'epri', valuedShort: '', flagShort: 'vh', inlineLong: ['eval', 'print', 'preload', 'require', 'import'],
    inlineSubcommands: ['repl'], stopAtScript: false, dataUrls: true,
  },
  { match: /^deno$/, inlineShort: '', valuedShort: '', flagShort: '', inlineSubcommands: ['eval', 'repl'], inlineLong: ['eval'], stopAtScript: false, dataUrls: true },
  {
    match: /^perl[\d.]*$/, inlineShort: 'eE', valuedShort: 'MmIiDdxF', digitsShort: 'l0C', flagShort: 'acnpsStTuUvVwWXhg', stopAtScript: true, standalone: /^-(?:v|V|h|V:.*)$/,
    valueCheck: (opt, v) => (/^-[Mm]/.test(opt) && !PERL_MODULE.test(v) ? 'its module name carries Perl code' : null),
  },
  {
    match: /^(?:ruby[\d.]*|jruby|truffleruby)$/, inlineShort: 'e', valuedShort: 'rIECFKxiWX', digitsShort: '0T', flagShort: 'acdhlnpsSvwy', stopAtScript: true, standalone: /^(?:-v|-h|--copyright)$/,
    flagLong: ['version', 'verbose', 'help', 'yjit', 'jit', 'copyright', 'disable-gems'],
    valuedLong: ['encoding', 'external-encoding', 'internal-encoding', 'enable', 'disable', 'dump', 'backtrace-limit', 'crash-report', 'parser'],
  },
  {
    match: /^php[\d.]*$/, inlineShort: 'rRBEa', valuedShort: 'cdfzFtS', flagShort: 'hilmnqsvwHe', stopAtScript: true, standalone: /^(?:-[vhim]|--info|--modules)$/,
    inlineLong: ['run', 'process-begin', 'process-code', 'process-end', 'interactive'],
    flagLong: ['help', 'version', 'info', 'modules', 'no-php-ini', 'no-chdir', 'syntax-check', 'hide-args', 'strip'],
    valuedLong: ['define', 'php-ini', 'file', 'zend-extension', 'process-file', 'docroot', 'server', 'rf', 'rc', 're', 'rz', 'ri'],
    valueCheck: (opt, v) => ((opt === '-d' || opt === '--define') && PHP_INI_CODE.test(v) ? 'this ini setting makes PHP include code before or after the script' : null),
  },
  {
    match: /^(?:sh|bash|dash|zsh|ksh|ksh93|mksh|pdksh|lksh|oksh|ash|yash|posh|rbash)$/, inlineShort: 'cis', valuedShort: '', nextArgShort: 'oO',
    flagShort: 'abefhklmnprtuvxBCEHPT', stopAtScript: true, plusOptions: true, valuedLong: ['rcfile', 'init-file'],
    flagLong: ['login', 'noprofile', 'norc', 'posix', 'restricted', 'verbose', 'version', 'help', 'debugger', 'dump-strings', 'dump-po-strings', 'noediting', 'pretty-print'],
  },
  { match: /^fish$/, inlineShort: 'ciC', valuedShort: 'dDf', flagShort: 'lnNpPv', inlineLong: ['command', 'init-command', 'interactive'], stopAtScript: true, standalone: /^-[vh]$/ },
  {
    match: /^(?:Rscript|R)$/, inlineShort: 'e', valuedShort: 'gdf', flagShort: 'hqsv', stopAtScript: true,
    flagLong: ['help', 'version', 'verbose', 'vanilla', 'no-save', 'save', 'no-environ', 'no-site-file', 'no-init-file', 'no-restore', 'quiet', 'silent', 'slave', 'no-echo', 'interactive'],
    valueCheck: (opt, v) => (opt === '--file' && STDIN.test(v) ? 'it reads the program from stdin, which the policy cannot screen' : null),
  },
  // elixir scans every argument: `elixir -S mix run -e CODE` hands `-e` to mix, which evaluates it.
  { match: /^(?:elixir|iex)$/, inlineShort: 'e', valuedShort: 'rS', flagShort: 'hv', inlineLong: ['eval', 'rpc-eval', 'erl'], stopAtScript: false },
  { match: /^erl$/, inlineShort: '', valuedShort: '', flagShort: '', inlineWord: ['eval', 's', 'run', 'S', 'extra'], stopAtScript: false },
  { match: /^(?:kotlin|kotlinc|kotlinc-jvm)$/, inlineShort: '', valuedShort: '', flagShort: '', inlineWord: ['e', 'expression'], stopAtScript: false },
  { match: /^(?:lua[\d.]*|luajit)$/, inlineShort: 'ei', valuedShort: 'ljb', flagShort: 'vEW', stopAtScript: true, standalone: /^-v$/ },
  { match: /^julia$/, inlineShort: 'eEi', valuedShort: 'LJCpOtgdm', flagShort: 'hvqh', inlineLong: ['eval', 'print', 'interactive'], stopAtScript: true, standalone: /^-[vh]$/ },
  { match: /^groovy$/, inlineShort: 'e', valuedShort: 'cDl', flagShort: 'hvdn', stopAtScript: true, standalone: /^-[vh]$/ },
  { match: /^scala$/, inlineShort: '', valuedShort: '', flagShort: '', inlineWord: ['e'], stopAtScript: false },
  // Editors: `-c`/`--cmd`/`+cmd` run editor commands; `-e`/`-E` read ex commands from stdin.
  { match: /^(?:vim|vi|nvim|view|ex|gvim|rvim|vimdiff|evim)$/, inlineShort: 'ceE', valuedShort: 'STtiuUwWrq', flagShort: 'bdDhlmMnNRsyZAFgHLfo', inlineLong: ['cmd'], plusInline: true, stopAtScript: false },
  { match: /^emacs$/, inlineShort: '', valuedShort: '', flagShort: '', inlineLong: ['eval', 'load', 'funcall', 'execute'], inlineWord: ['eval', 'l', 'load', 'f', 'funcall', 'execute'], stopAtScript: false },
];

export function interpreterScreen(base: string): Screen | undefined {
  if (/^(?:pwsh|powershell)(?:\.exe)?$/i.test(base)) return screenPowershell;
  const spec = INTERPRETERS.find((s) => s.match.test(base));
  // In code mode the agent runs `<exe> <file> <args…>`: the arguments belong to the program.
  return spec ? (args, ctx) => (ctx.allowInlineCode || ctx.codeMode ? null : screenInterpreter(spec, args, ctx)) : undefined;
}

/** Arguments that print something and exit: an interpreter given one needs no script. */
const INFO = new Set(['--version', '--help', '-version', '-help', '-?']);

function screenInterpreter(s: Interpreter, args: readonly string[], ctx: ScreenContext): string | null {
  // How many coming positional arguments are option values rather than the script: `certain`
  // for options known to take one, `unsure` for options of unknown arity. Only positionals pay
  // them off; an option-looking argument is screened as an option either way, so the counts can
  // only make the scan go further (stricter), never stop early at a value.
  let certain = 0;
  let unsure = 0;
  let unsurePaid = 0;
  let positionals = 0;
  const stdin = (a: string) => inlineDenied(a, ctx, 'it reads the program from stdin, which the policy cannot screen');
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (s.dataUrls && /^data:|=data:/i.test(a)) return inlineDenied(a, ctx, 'it runs code from a data: URL');
    if (STDIN.test(a)) return stdin(a);
    if (a === '--') {
      if (!s.stopAtScript || certain + unsure > 0) continue;
      const script = args[i + 1];
      if (script === undefined) break;
      return STDIN.test(script) ? stdin(script) : null;
    }
    const long = longOption(a);
    if (long) {
      const name = s.underscores ? long.name.replace(/_/g, '-') : long.name;
      if (s.inlineLong?.includes(name)) return inlineDenied(a, ctx);
      if (long.value !== undefined) {
        const bad = s.valueCheck?.(`--${name}`, long.value);
        if (bad) return inlineDenied(a, ctx, bad);
      } else {
        if (s.valueCheck && args[i + 1] !== undefined) {
          const bad = s.valueCheck(`--${name}`, args[i + 1]);
          if (bad) return inlineDenied(`${a} ${args[i + 1]}`, ctx, bad);
        }
        if (s.valuedLong?.includes(name)) certain++;
        else if (!s.flagLong?.includes(name) && !name.startsWith('no-')) unsure++;
      }
      continue;
    }
    if (s.inlineWord && a.startsWith('-') && s.inlineWord.includes(a.slice(1))) return inlineDenied(a, ctx);
    const cluster = shortCluster(a) ?? (s.plusOptions && /^\+[A-Za-z]/.test(a) ? a.slice(1) : null);
    if (cluster !== null) {
      if (s.inlineWord && !s.inlineShort) {
        unsure++; // word-style options: arity unknown
        continue;
      }
      for (let j = 0; j < cluster.length; j++) {
        const c = cluster[j];
        if (s.inlineShort.includes(c)) return inlineDenied(a, ctx);
        if (s.valuedShort.includes(c)) {
          // getopt style: the rest of the cluster is the value, else the next argument is.
          const attached = cluster.slice(j + 1);
          const value = attached !== '' ? attached : args[i + 1];
          const bad = value !== undefined ? s.valueCheck?.(`-${c}`, value) : null;
          if (bad) return inlineDenied(attached !== '' ? a : `${a} ${value}`, ctx, bad);
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
    positionals++;
    if (s.stopAtScript) return null;
  }
  // No script at all: the interpreter would read its program from stdin (or start a REPL on it).
  // When an option of unknown arity may have taken the script as its value, give it the benefit.
  if (s.stopAtScript && positionals === 0 && unsurePaid === 0 && !args.some((a) => INFO.has(a) || s.standalone?.test(a))) {
    return inlineDenied(args.length ? args.join(' ') : '(none)', ctx, 'no script is given, so it would read the program from stdin');
  }
  return null;
}

/** PowerShell: `-Command`/`-EncodedCommand`/`-CommandWithArgs`, case-insensitive and abbreviable. */
const screenPowershell: Screen = (args, ctx) => {
  if (ctx.allowInlineCode || ctx.codeMode) return null;
  for (const a of args) {
    if (a === '-') return inlineDenied(a, ctx, 'it reads the program from stdin, which the policy cannot screen');
    if (!/^[-/]/.test(a)) continue;
    const name = a.slice(1).toLowerCase().split(':')[0];
    if (name === '') continue;
    if (['command', 'encodedcommand', 'commandwithargs'].some((w) => w.startsWith(name)) || ['ec', 'enc', 'cwa'].includes(name)) return inlineDenied(a, ctx);
    if ('file'.startsWith(name)) return null; // -File script: the rest are the script's arguments
  }
  return null;
};
