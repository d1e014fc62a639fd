/**
 * The stdin rule against the real programs: each one runs with a program on stdin that prints a
 * computed 48 (so echoed source text is never mistaken for execution) and, in some vectors, a
 * workspace script. Whenever the real program ran the stdin code, the screen must have denied the
 * vector; one named vector must really run it (the rule guards a real behaviour). The programs are
 * those scripts/install-system-deps.sh installs (kotlin, the JDK's jshell, ruby's irb, elixir's
 * iex and erl, r-base-core's R): outside CI a missing one is skipped with a warning, under
 * CI=true it fails.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PolicyDocument } from '../../src/contracts/policy.ts';
import { screenArguments } from '../../src/policy/argument-screens.ts';

const P = PolicyDocument.parse({ version: 1 });
const dir = mkdtempSync(join(tmpdir(), 'stdin-code-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Program {
  exe: string;
  /** Prints 6*8 computed. */
  stdin: string;
  script: [string, string];
  vectors: string[][];
  /** Seconds one start may take (JVM programs start slowly on a loaded machine). */
  timeoutS: number;
  /** A vector that really runs the stdin program; none for programs left out of the rule (then no vector may run it). */
  attack?: string[];
}

const PROGRAMS: Program[] = [
  {
    exe: 'kotlinc',
    stdin: 'println(6*8)\n',
    script: ['s.kts', 'println("script")\n'],
    timeoutS: 120,
    attack: [],
    vectors: [[], ['-nowarn'], ['-d', 'out'], ['-cp', '.'], ['-script', 's.kts']],
  },
  {
    exe: 'jshell',
    stdin: 'System.out.println(6*8);\n',
    script: ['s.jsh', 'System.out.println("script");\n'],
    timeoutS: 120,
    attack: ['s.jsh'],
    vectors: [[], ['s.jsh'], ['--class-path', '.'], ['-q', 's.jsh']],
  },
  {
    exe: 'irb',
    stdin: 'puts 6*8\n',
    script: ['s.rb', 'puts "script"\n'],
    timeoutS: 60,
    attack: [],
    vectors: [[], ['-f'], ['-r', 'json'], ['s.rb'], ['-f', 's.rb']],
  },
  { exe: 'iex', stdin: 'IO.puts 6*8\n', script: ['s.exs', 'IO.puts "script"\n'], timeoutS: 60, attack: ['s.exs'], vectors: [[], ['s.exs']] },
  // `erl -noshell` without -s/-eval runs no shell and never halts: its vector ends at the timeout, having read nothing.
  { exe: 'erl', stdin: 'io:format("~p~n", [6*8]).\n', script: ['s.erl', ''], timeoutS: 20, attack: [], vectors: [[], ['-pa', '.'], ['-noshell']] },
  // Bare `R` refuses to start without --save/--no-save/--vanilla; with one it reads stdin, and ignores a positional file.
  {
    exe: 'R',
    stdin: 'cat(6*8, "\\n")\n',
    script: ['s.R', 'cat("script\\n")\n'],
    timeoutS: 60,
    attack: ['--vanilla', 's.R'],
    vectors: [[], ['--vanilla'], ['--vanilla', 's.R'], ['--vanilla', '-f', 's.R'], ['--vanilla', '--file=s.R']],
  },
  // Left out of the rule: elixir without a script prints its usage.
  { exe: 'elixir', stdin: 'IO.puts 6*8\n', script: ['s.exs', 'IO.puts "script"\n'], timeoutS: 60, vectors: [[], ['s.exs']] },
];

const installed = (exe: string) => spawnSync('sh', ['-c', `command -v ${exe}`], { stdio: 'ignore' }).status === 0;
const RAN = /(?<!\d)48(?!\d)/;

describe('the stdin rule agrees with the real programs', () => {
  for (const p of PROGRAMS) {
    const skip = !installed(p.exe) && process.env.CI !== 'true';
    if (skip) console.warn(`stdin-code-differential: ${p.exe} is not installed, skipped (allowed outside CI only)`);
    it.skipIf(skip)(
      `${p.exe}: every vector that ran stdin code was denied`,
      () => {
        if (!installed(p.exe)) throw new Error(`${p.exe} is required under CI=true (scripts/install-system-deps.sh installs it)`);
        writeFileSync(join(dir, p.script[0]), p.script[1]);
        const missed: string[][] = [];
        const ran: string[][] = [];
        for (const args of p.vectors) {
          const r = spawnSync(p.exe, args, {
            input: p.stdin,
            encoding: 'utf8',
            timeout: p.timeoutS * 1000,
            killSignal: 'SIGKILL',
            cwd: dir,
            env: { ...process.env, HOME: dir, TERM: 'dumb' },
          });
          if (!RAN.test(r.stdout ?? '')) continue;
          ran.push(args);
          if (screenArguments(P, p.exe, args).ok) missed.push(args);
        }
        if (p.attack) expect(ran).toContainEqual(p.attack);
        else expect(ran).toEqual([]);
        expect(missed).toEqual([]);
      },
      600_000,
    );
  }
});
