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
  /** Short letters whose value is only optional attached digits (perl `-l0`, `-0777`): scanning goes on after them. */
  digitsShort?: string;
  /** Short letters known to take no value (anything else might take one). */
  flagShort: string;
  /** After this valued letter the remaining arguments belong to the program (`python -m mod …`). */
  endShort?: string;
  /** Long options known to take no value. */
  flagLong?: string[];
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
  /** Extra value checks (perl -M module specs, php -d ini settings). */
  valueCheck?: (opt: string, value: string) => string | null;
}

const STDIN = /^(?:-|\/dev\/stdin|\/dev\/fd\/0|\/proc\/(?:self|thread-self|\d+)\/fd\/0)$/;

const PERL_MODULE = /^-?[A-Za-z_][\w:]*(?:=.*)?$/s;
const PHP_INI_CODE = /^\s*(?:auto_prepend_file|auto_append_file|allow_url_include|allow_url_fopen)\s*=/i;

const INTERPRETERS: Interpreter[] = [
  {
    match: /^(?:python[\d.]*|pypy[\d.]*)$/, inlineShort: 'ci', valuedShort: 'cmWXQ', endShort: 'm',
    flagShort: 'bBdEhIOqsSuvVxRP?', flagLong: ['help', 'version', 'help-env', 'help-xoptions', 'help-all'], stopAtScript: true,
  },
  {
    match: /^(?:node|nodejs|tsx|ts-node|ts-node-esm|ts-node-script)$/, inlineShort: 'epri', valuedShort: 'C', flagShort: 'vhc',
    inlineLong: ['eval', 'print', 'import', 'require', 'loader', 'experimental-loader', 'env-file', 'env-file-if-exists', 'interactive'],
    flagLong: ['version', 'help', 'check', 'test', 'watch', 'no-warnings', 'trace-warnings', 'enable-source-maps', 'experimental-strip-types',
      'experimental-transform-types', 'no-experimental-strip-types', 'experimental-vm-modules', 'expose-gc', 'trace-uncaught', 'pending-deprecation',
      'throw-deprecation', 'preserve-symlinks', 'experimental-test-coverage', 'test-only', 'no-deprecation', 'abort-on-uncaught-exception'],
    stopAtScript: true, underscores: true,
  },
  {
    match: /^bun$/, inlineShort: 'epri', valuedShort: '', flagShort: 'vh', inlineLong: ['eval', 'print', 'preload', 'require', 'import'],
    inlineSubcommands: ['repl'], stopAtScript: false,
  },
  { match: /^deno$/, inlineShort: '', valuedShort: '', flagShort: '', inlineSubcommands: ['eval', 'repl'], inlineLong: ['eval'], stopAtScript: false },
  {
    match: /^perl[\d.]*$/, inlineShort: 'eE', valuedShort: 'MmIiDdxF', digitsShort: 'l0C', flagShort: 'acnpsStTuUvVwWXhg', stopAtScript: true,
    valueCheck: (opt, v) => (/^-[Mm]/.test(opt) && !PERL_MODULE.test(v) ? 'its module name carries Perl code' : null),
  },
  {
    match: /^(?:ruby[\d.]*|jruby|truffleruby)$/, inlineShort: 'e', valuedShort: 'rIECFKxiWX', digitsShort: '0T', flagShort: 'acdhlnpsSvwy', stopAtScript: true,
    flagLong: ['version', 'verbose', 'help', 'yjit', 'jit', 'copyright', 'disable-gems'],
  },
  {
    match: /^php[\d.]*$/, inlineShort: 'rRBEa', valuedShort: 'cdfzFtS', flagShort: 'hilmnqsvwHe', stopAtScript: true,
    inlineLong: ['run', 'process-begin', 'process-code', 'process-end', 'interactive'],
    flagLong: ['help', 'version', 'info', 'modules', 'no-php-ini', 'no-chdir', 'syntax-check', 'hide-args', 'strip'],
    valueCheck: (opt, v) => ((opt === '-d' || opt === '--define') && PHP_INI_CODE.test(v) ? 'this ini setting makes PHP include code before or after the script' : null),
  },
  {
    match: /^(?:sh|bash|dash|zsh|ksh|ksh93|mksh|pdksh|lksh|oksh|ash|yash|posh|rbash)$/, inlineShort: 'cis', valuedShort: 'oO',
    flagShort: 'abefhklmnprtuvxBCEHPT', stopAtScript: true, plusOptions: true,
    flagLong: ['login', 'noprofile', 'norc', 'posix', 'restricted', 'verbose', 'version', 'help', 'debugger', 'dump-strings', 'dump-po-strings', 'noediting', 'pretty-print'],
  },
  { match: /^fish$/, inlineShort: 'ciC', valuedShort: 'dDf', flagShort: 'lnNpPv', inlineLong: ['command', 'init-command', 'interactive'], stopAtScript: true },
  {
    match: /^(?:Rscript|R)$/, inlineShort: 'e', valuedShort: 'gdf', flagShort: 'hqsv', stopAtScript: true,
    flagLong: ['help', 'version', 'verbose', 'vanilla', 'no-save', 'save', 'no-environ', 'no-site-file', 'no-init-file', 'no-restore', 'quiet', 'silent', 'slave', 'no-echo', 'interactive'],
    valueCheck: (opt, v) => (opt === '--file' && STDIN.test(v) ? 'it reads the program from stdin, which the policy cannot screen' : null),
  },
  // elixir scans every argument: `elixir -S mix run -e CODE` hands `-e` to mix, which evaluates it.
  { match: /^(?:elixir|iex)$/, inlineShort: 'e', valuedShort: 'rS', flagShort: 'hv', inlineLong: ['eval', 'rpc-eval', 'erl'], stopAtScript: false },
  { match: /^erl$/, inlineShort: '', valuedShort: '', flagShort: '', inlineWord: ['eval', 's', 'run', 'S', 'extra'], stopAtScript: false },
  { match: /^(?:kotlin|kotlinc|kotlinc-jvm)$/, inlineShort: '', valuedShort: '', flagShort: '', inlineWord: ['e', 'expression'], stopAtScript: false },
  { match: /^(?:lua[\d.]*|luajit)$/, inlineShort: 'ei', valuedShort: 'ljb', flagShort: 'vEW', stopAtScript: true },
  { match: /^julia$/, inlineShort: 'eEi', valuedShort: 'LJCpOtgdm', flagShort: 'hvqh', inlineLong: ['eval', 'print', 'interactive'], stopAtScript: true },
  { match: /^groovy$/, inlineShort: 'e', valuedShort: 'cDl', flagShort: 'hvdn', stopAtScript: true },
  { match: /^scala$/, inlineShort: '', valuedShort: '', flagShort: '', inlineWord: ['e'], stopAtScript: false },
  // Editors: `-c`/`--cmd`/`+cmd` run editor commands; `-e`/`-E` read ex commands from stdin.
  { match: /^(?:vim|vi|nvim|view|ex|gvim|rvim|vimdiff|evim)$/, inlineShort: 'ceE', valuedShort: 'STtiuUwWrq', flagShort: 'bdDhlmMnNRsyZAFgHLfo', inlineLong: ['cmd'], plusInline: true, stopAtScript: false },
  { match: /^emacs$/, inlineShort: '', valuedShort: '', flagShort: '', inlineLong: ['eval', 'load', 'funcall', 'execute'], inlineWord: ['eval', 'l', 'load', 'f', 'funcall', 'execute'], stopAtScript: false },
];

export function interpreterScreen(base: string): Screen | undefined {
  if (/^(?:pwsh|powershell)(?:\.exe)?$/i.test(base)) return screenPowershell;
  const spec = INTERPRETERS.find((s) => s.match.test(base));
  return spec ? (args, ctx) => (ctx.allowInlineCode ? null : screenInterpreter(spec, args, ctx)) : undefined;
}

function screenInterpreter(s: Interpreter, args: readonly string[], ctx: ScreenContext): string | null {
  let mayBeValue = false; // the previous option may have taken this argument as its value
  let positionals = 0;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const prevMayBeValue = mayBeValue;
    mayBeValue = false;
    if (STDIN.test(a) && !prevMayBeValue) return inlineDenied(a, ctx, 'it reads the program from stdin, which the policy cannot screen');
    if (a === '--') {
      if (!s.stopAtScript) continue;
      const script = args[i + 1];
      if (script !== undefined && STDIN.test(script)) return inlineDenied(script, ctx, 'it reads the program from stdin, which the policy cannot screen');
      return null;
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
        mayBeValue = !s.flagLong?.includes(name);
      }
      continue;
    }
    if (s.inlineWord && a.startsWith('-') && s.inlineWord.includes(a.slice(1))) return inlineDenied(a, ctx);
    const cluster = shortCluster(a) ?? (s.plusOptions && /^\+[A-Za-z]/.test(a) ? a.slice(1) : null);
    if (cluster !== null) {
      if (s.inlineWord && !s.inlineShort) {
        mayBeValue = true; // word-style options: arity unknown
        continue;
      }
      for (let j = 0; j < cluster.length; j++) {
        const c = cluster[j];
        if (s.inlineShort.includes(c)) return inlineDenied(a, ctx);
        if (s.valuedShort.includes(c)) {
          const attached = cluster.slice(j + 1);
          const value = attached !== '' ? attached : args[i + 1];
          const bad = value !== undefined ? s.valueCheck?.(`-${c}`, value) : null;
          if (bad) return inlineDenied(attached !== '' ? a : `${a} ${value}`, ctx, bad);
          if (s.endShort?.includes(c)) return null;
          mayBeValue = attached === '';
          break;
        }
        if (s.digitsShort?.includes(c)) {
          while (j + 1 < cluster.length && /[0-9a-fA-Fx]/.test(cluster[j + 1]) && !s.inlineShort.includes(cluster[j + 1])) j++;
          continue;
        }
        if (!s.flagShort.includes(c) && j === cluster.length - 1) mayBeValue = true;
      }
      continue;
    }
    // A positional argument.
    if (s.plusInline && /^\+\D/.test(a)) return inlineDenied(a, ctx, 'it runs an editor command');
    if (positionals === 0 && s.inlineSubcommands?.includes(a)) return inlineDenied(a, ctx);
    if (/^data:/i.test(a) && s.inlineSubcommands) return inlineDenied(a, ctx, 'it runs code from a data: URL');
    if (prevMayBeValue) continue;
    positionals++;
    if (s.stopAtScript) return null;
  }
  return null;
}

/** PowerShell: `-Command`/`-EncodedCommand`/`-CommandWithArgs`, case-insensitive and abbreviable. */
const screenPowershell: Screen = (args, ctx) => {
  if (ctx.allowInlineCode) return null;
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
