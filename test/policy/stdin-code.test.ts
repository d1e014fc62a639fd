/**
 * Code on stdin: one rule over the interpreter screens' table. Every program that reads its
 * program from stdin without a script (or after its files, a REPL) is denied with the same
 * reason, and the same program given a script runs as before. The real programs' behaviour
 * behind each entry is checked in stdin-code-differential.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { STDIN_CODE_TABLE } from '../../src/policy/screens/interpreters.ts';
import { AFTER_FILES_REASON, NO_SCRIPT_REASON } from '../../src/policy/screens/interpreters/scan.ts';
import { PRESETS } from '../../src/policy/presets.ts';
import { policy, run } from './helpers.ts';

interface Case {
  /** Argument vectors without a script: denied with the no-script reason. */
  none: string[][];
  /** With a script: allowed (for `always` programs: denied, a REPL follows the files). */
  script: string[][];
  /** Vectors that read stdin through an option (`ghc --interactive`). */
  stdinOption?: string[][];
  /** Vectors that never read a program from stdin (`erl -noshell`, `--version`). */
  safe?: string[][];
}

const CASES: Record<string, Case> = {
  // JVM
  kotlinc: {
    none: [[], ['-nowarn'], ['-d', 'out'], ['-cp', '.'], ['-jvm-target', '1.8', '-verbose'], ['-opt-in', 'kotlin.RequiresOptIn']],
    script: [
      ['Main.kt'],
      ['-d', 'out', 'Main.kt'],
      ['-script', 's.kts'],
      ['-Xno-inline', 'Main.kt'],
      ['-cp', 'lib.jar', '-nowarn', 'Main.kt'],
      ['Main.kt', '-d', 'out'],
    ],
    safe: [['-version'], ['-help']],
  },
  'kotlinc-jvm': { none: [[]], script: [['Main.kt']] },
  kotlin: { none: [[], ['-cp', 'app.jar']], script: [['MainKt'], ['-cp', 'app.jar', 'MainKt'], ['-J-Xmx1g', 'MainKt']] },
  jshell: { none: [[], ['--class-path', 'lib']], script: [['s.jsh']], safe: [['--version']] },
  jrunscript: { none: [[], ['x.js'], ['-cp', 'lib']], script: [['-f', 'x.js']], safe: [['-q']] },
  scala: { none: [[], ['-cp', 'lib'], ['-i', 'init.scala'], ['--dep', 'org::lib:1.0']], script: [['x.scala'], ['-cp', 'lib', 'Main'], ['run', '.']] },
  groovy: { none: [[]], script: [['x.groovy']] },
  groovysh: { none: [[]], script: [['x.groovy']] },
  // .NET: `dotnet fsi`, F# and C# interactive by their assemblies, dotnet-script, mono's shells
  dotnet: {
    none: [
      ['fsi'],
      ['fsi', '--quiet'],
      ['fsi', '--use:init.fsx'],
      ['fsi', '-r:lib.dll'],
      ['exec', '/usr/share/dotnet/sdk/8.0.100/FSharp/fsi.dll'],
      ['/usr/lib/dotnet/sdk/8.0.100/Roslyn/bincore/csi.dll'],
      ['--roll-forward', 'Major', 'fsi'],
      ['script'],
    ],
    script: [
      ['fsi', 'x.fsx'],
      ['fsi', '--quiet', 'x.fsx'],
      ['fsi', '--use:init.fsx', '--exec'],
      ['script', 'x.csx'],
      ['build'],
      ['run'],
      ['test'],
      ['bin/app.dll'],
    ],
    stdinOption: [
      ['script', '-i', 'x.csx'],
      ['fsi', '-'],
    ],
    safe: [['--info'], ['--version'], []],
  },
  fsi: { none: [[]], script: [['x.fsx']] },
  fsharpi: { none: [[]], script: [['x.fsx']] },
  csi: { none: [[], ['/r:lib.dll'], ['-r:lib.dll']], script: [['x.csx'], ['/r:lib.dll', 'x.csx'], ['/work/x.csx']], stdinOption: [['-i', 'x.csx']] },
  'dotnet-script': { none: [[]], script: [['x.csx']], stdinOption: [['--interactive', 'x.csx']] },
  csharp: { none: [[]], script: [['x.cs']] },
  // Haskell
  ghci: { none: [[]], script: [['Main.hs']] },
  runghc: { none: [[], ['-package', 'text']], script: [['Main.hs'], ['-package', 'text', 'Main.hs'], ['-O2', 'Main.hs']] },
  runhaskell: { none: [[]], script: [['Main.hs']] },
  // Lisp, ML, Tcl, Lua, Julia
  guile: { none: [[], ['-l', 'init.scm'], ['-L', 'lib']], script: [['x.scm'], ['-s', 'x.scm'], ['-L', 'lib', 'x.scm'], ['--no-auto-compile', 'x.scm']] },
  ocaml: { none: [[], ['lib.cma'], ['-I', 'lib']], script: [['x.ml'], ['lib.cma', 'x.ml'], ['-I', 'lib', 'x.ml']], stdinOption: [['-stdin']] },
  sbcl: {
    none: [[], ['--load', 'x.lisp'], ['--noinform'], ['--script'], ['x.lisp'], ['--end-toplevel-options', '--quit']],
    script: [['--script', 'x.lisp']],
    safe: [
      ['--non-interactive', '--load', 'build.lisp'],
      ['--load', 'x.lisp', '--quit'],
    ],
  },
  tclsh: { none: [[], ['-encoding', 'utf-8'], ['-foo', 'x.tcl']], script: [['x.tcl'], ['-encoding', 'utf-8', 'x.tcl']] },
  'tclsh8.6': { none: [[]], script: [['x.tcl']] },
  wish: { none: [[], ['-display', ':0']], script: [['x.tcl'], ['-sync', 'x.tcl']] },
  lua: { none: [[], ['-l', 'mod']], script: [['x.lua']] },
  julia: { none: [[]], script: [['x.jl']] },
  // The interpreters the screens already refused without a script
  node: { none: [[], ['--no-warnings']], script: [['x.js']], safe: [['--version'], ['--test']] },
  tsx: { none: [[]], script: [['x.ts']] },
  deno: { none: [[], ['-A']], script: [['run', 'x.ts'], ['fmt']], safe: [['--version']] },
  python3: { none: [[], ['-u']], script: [['x.py'], ['-m', 'pytest']], safe: [['-V']] },
  python: { none: [[]], script: [['x.py']] },
  perl: { none: [[], ['-w']], script: [['x.pl']] },
  ruby: { none: [[], ['-w']], script: [['x.rb']] },
  irb: { none: [[], ['-f'], ['-r', 'json']], script: [['s.rb'], ['-f', 's.rb']], safe: [['-v']] },
  php: { none: [[]], script: [['x.php']] },
  Rscript: { none: [[]], script: [['x.R']] },
  R: { none: [[], ['--vanilla'], ['x.R'], ['--vanilla', '-q', 'x.R']], script: [['-f', 'x.R'], ['--file=x.R'], ['CMD', 'INSTALL', 'pkg']] },
  iex: { none: [[]], script: [['s.exs']] },
  erl: { none: [[], ['-pa', 'ebin']], script: [], safe: [['-noshell'], ['-noshell', '-pa', 'ebin'], ['-detached']] },
  dc: { none: [[]], script: [['x.dc'], ['-f', 'x.dc']] },
  // Editors: commands from stdin can run shell commands
  vim: { none: [[]], script: [['f.txt']], safe: [['--version']] },
  vi: { none: [[]], script: [['f.txt']] },
  ex: { none: [[]], script: [['-s', 'f.txt']] },
  ed: { none: [[]], script: [['f.txt'], ['-s', 'f.txt']], safe: [['-r', 'f.txt']] },
  // Shells keep their own rules (a shell string is decided as a whole); without a script they read stdin
  sh: { none: [[]], script: [['s.sh']] },
  bash: { none: [[]], script: [['s.sh']] },
  fish: { none: [[]], script: [['s.fish']] },
  pwsh: {
    none: [[], ['-NoProfile'], ['-ExecutionPolicy', 'Bypass'], ['-ep', 'Bypass', '-NoLogo']],
    script: [['x.ps1'], ['-File', 'x.ps1'], ['-NoProfile', 'x.ps1'], ['-ExecutionPolicy', 'Bypass', '-File', 'x.ps1']],
    stdinOption: [['-NoExit', 'x.ps1']],
  },
};

/** Programs an `always` entry covers: a REPL follows the files they are given. */
const ALWAYS = new Set(['jshell', 'groovysh', 'csharp', 'ghci', 'iex', 'erl', 'vim', 'vi', 'ex', 'ed']);

const P = policy({ executables: { allow: Object.keys(CASES) } });
const noScript = (exe: string, shown: string) =>
  `Argument "${shown}" is not allowed for ${exe}: ${NO_SCRIPT_REASON}; a policy may permit it with argumentRules["${exe}"].allowInlineCode = true`;

describe('the stdin rule covers every entry of the table', () => {
  it('each entry that reads code from stdin has cases here, and the cases agree with its `when`', () => {
    for (const e of STDIN_CODE_TABLE) {
      const names = Object.keys(CASES).filter((n) => e.match?.test(n));
      const viaDotnet = e.dotnetCommand !== undefined && CASES.dotnet.none.some((a) => a.some((x) => e.dotnetCommand!.test(x)));
      expect(names.length > 0 || viaDotnet, `no cases for ${e.match ?? e.dotnetCommand}`).toBe(true);
      for (const n of names) expect(ALWAYS.has(n), n).toBe(e.when === 'always');
    }
  });
});

describe('without a script: denied with the one "no script is given" reason', () => {
  const rows = Object.entries(CASES).flatMap(([exe, c]) => c.none.map((a) => [`${exe} ${a.join(' ')}`.trim(), exe, a] as const));
  it.each(rows)('%s', async (_, exe, args) => {
    const d = await run(P, exe, ...args);
    expect(d.stage).toBe('arguments');
    expect(d.allowed).toBe(false);
    expect(d.reason).toBe(noScript(exe, args.length ? args.join(' ') : '(none)'));
  });
});

describe('with a script: allowed as before, except where a REPL follows the files', () => {
  const rows = Object.entries(CASES).flatMap(([exe, c]) => c.script.map((a) => [`${exe} ${a.join(' ')}`, exe, a] as const));
  it.each(rows)('%s', async (_, exe, args) => {
    const d = await run(P, exe, ...args);
    if (ALWAYS.has(exe)) {
      expect(d.allowed).toBe(false);
      expect(d.reason).toContain(AFTER_FILES_REASON);
    } else {
      expect(d.reason).toBe('Allowed by the team policy');
    }
  });
});

describe('options that read stdin, and options after which stdin carries no program', () => {
  const reading = Object.entries(CASES).flatMap(([exe, c]) => (c.stdinOption ?? []).map((a) => [`${exe} ${a.join(' ')}`, exe, a] as const));
  it.each(reading)('%s is denied', async (_, exe, args) => {
    const d = await run(P, exe, ...args);
    expect(d.allowed).toBe(false);
    expect(d.reason).toMatch(/reads (the program|commands) from stdin/);
  });
  const safe = Object.entries(CASES).flatMap(([exe, c]) => (c.safe ?? []).map((a) => [`${exe} ${a.join(' ')}`.trim(), exe, a] as const));
  it.each(safe)('%s is allowed', async (_, exe, args) => {
    expect((await run(P, exe, ...args)).reason).toBe('Allowed by the team policy');
  });
  it('ghc compiles without reading stdin, but --interactive is GHCi', async () => {
    const p = policy({ executables: { allow: ['ghc'] } });
    expect((await run(p, 'ghc', '-O2', '-o', 'main', 'Main.hs')).allowed).toBe(true);
    expect((await run(p, 'ghc', '--interactive', 'Main.hs')).reason).toContain('reads the program from stdin');
  });
});

describe('left out on purpose', () => {
  it('programs that print their usage or run no code from stdin stay allowed without a script', async () => {
    const p = policy({ executables: { allow: ['elixir', 'bun', 'bc', 'java', 'escript'] } });
    for (const exe of ['elixir', 'bun', 'bc', 'java', 'escript']) expect((await run(p, exe)).reason, exe).toBe('Allowed by the team policy');
  });
});

describe('php -S', () => {
  it("is refused for what it is: a web server running the workspace's PHP files, not code on stdin", async () => {
    const d = await run(P, 'php', '-S', '127.0.0.1:8000');
    expect(d.allowed).toBe(false);
    expect(d.reason).toBe(
      'Argument "-S 127.0.0.1:8000" is not allowed for php: it starts PHP\'s built-in web server, which runs the workspace\'s PHP files for each request instead of one script; ' +
        'a policy may permit it with argumentRules["php"].allowInlineCode = true',
    );
    expect((await run(P, 'php', '-t', 'public', '-S', 'localhost:8080')).reason).toContain('built-in web server');
  });
});

describe('allowInlineCode permits code on stdin like inline code', () => {
  it('for the program it names only', async () => {
    const p = policy({ executables: { allow: ['kotlinc', 'jshell'] }, argumentRules: { kotlinc: { allowInlineCode: true } } });
    expect((await run(p, 'kotlinc')).allowed).toBe(true);
    expect((await run(p, 'jshell')).allowed).toBe(false);
  });
  it('the open preset permits it for every interpreter it allows, kotlinc and dotnet included', async () => {
    const open = PRESETS.open.policy;
    for (const exe of ['kotlinc', 'dotnet', 'node', 'python3', 'sh']) expect(open.argumentRules[exe]?.allowInlineCode, exe).toBe(true);
    expect((await run(open, 'kotlinc')).allowed).toBe(true);
    expect((await run(open, 'dotnet', 'fsi')).allowed).toBe(true);
  });
  it('the standard preset refuses kotlinc and dotnet fsi without a script, and runs them with one', async () => {
    const standard = PRESETS.standard.policy;
    expect((await run(standard, 'kotlinc')).reason).toBe(noScript('kotlinc', '(none)'));
    expect((await run(standard, 'dotnet', 'fsi')).reason).toBe(noScript('dotnet', 'fsi'));
    expect((await run(standard, 'kotlinc', '-d', 'out', 'Main.kt')).allowed).toBe(true);
    expect((await run(standard, 'dotnet', 'fsi', 'x.fsx')).allowed).toBe(true);
  });
});
