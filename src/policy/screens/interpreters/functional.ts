/**
 * The interpreter table's functional and Lisp languages (src/policy/screens/interpreters.ts): Elixir and iex, Erlang,
 * Haskell (ghci, ghc, runghc), Guile, OCaml, SBCL.
 */
import { ALWAYS, type Interpreter, NO_POSITIONAL_SCRIPT } from './spec.ts';

const ELIXIR_OPTIONS = { inlineShort: 'e', valuedShort: 'rS', flagShort: 'hv', inlineLong: ['eval', 'rpc-eval', 'erl'], standalone: /^-[vh]$/ };

export const FUNCTIONAL: Interpreter[] = [
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
];
