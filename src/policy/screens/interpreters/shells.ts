/**
 * The interpreter table's command languages (src/policy/screens/interpreters.ts): the sh family and fish, dc, and the
 * editors whose commands run shell commands (vim, ed, emacs). PowerShell has its own parser: ./powershell.ts.
 */
import { ALWAYS, type Interpreter, NO_SCRIPT } from './spec.ts';

export const SHELLS: Interpreter[] = [
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
];
