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
 *
 * The table is one module per family in ./interpreters/ (`spec.ts` says what an entry holds, `scan.ts` applies it;
 * PowerShell and the `dotnet` host have parsers of their own); this module puts it together and picks the screen.
 */
import type { Screen } from './common.ts';
import { DOTNET, screenDotnet } from './interpreters/dotnet.ts';
import { FUNCTIONAL } from './interpreters/functional.ts';
import { JVM } from './interpreters/jvm.ts';
import { POWERSHELL, screenPowershell } from './interpreters/powershell.ts';
import { screenInterpreter } from './interpreters/scan.ts';
import { SCRIPTING } from './interpreters/scripting.ts';
import { SHELLS } from './interpreters/shells.ts';
import type { Interpreter, StdinCode } from './interpreters/spec.ts';

/** The one table, by family (each name matches its own executables: the order decides nothing). */
const INTERPRETERS: Interpreter[] = [...SCRIPTING, ...SHELLS, ...FUNCTIONAL, ...JVM, ...DOTNET, ...POWERSHELL];

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
