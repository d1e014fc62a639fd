/**
 * PowerShell in the interpreter table (src/policy/screens/interpreters.ts), with its own parser: its parameters are
 * case-insensitive and abbreviable, so the common scan (./scan.ts) does not apply.
 */
import { inlineDenied, type ScreenContext } from '../common.ts';
import { FROM_STDIN, INFO, type StdinSeen, stdinCodeReason } from './scan.ts';
import { type Interpreter, NO_SCRIPT } from './spec.ts';

export const POWERSHELL: Interpreter[] = [
  // PowerShell reads commands from stdin without -File, a script or -Command; its own parser is screenPowershell.
  { match: /^(?:pwsh|powershell)(?:\.exe)?$/i, inlineShort: '', valuedShort: '', flagShort: '', stopAtScript: true, stdinCode: NO_SCRIPT, powershell: true },
];

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
export function screenPowershell(s: Interpreter, args: readonly string[], ctx: ScreenContext): string | null {
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
