/**
 * The interpreter table's .NET programs (src/policy/screens/interpreters.ts): F# Interactive, the C# script runners and
 * mono's C# shell, and the `dotnet` host that runs some of them (`dotnet fsi`, `dotnet …/csi.dll`).
 */
import type { Screen } from '../common.ts';
import { screenInterpreter } from './scan.ts';
import { ALWAYS, type Interpreter, NO_SCRIPT } from './spec.ts';

export const DOTNET: Interpreter[] = [
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
];

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
export const screenDotnet: Screen = (args, ctx) => {
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
  const spec = DOTNET.find((s) => s.dotnetCommand?.test(command));
  return spec ? screenInterpreter(spec, args.slice(i + 1), ctx, args.slice(0, i + 1).join(' ')) : null;
};
