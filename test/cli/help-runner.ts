/**
 * Runs the admin CLI's `main` for many argument lists in one Node process and prints
 * `[{ argv, code, stdout, stderr }]` as JSON: each `--help` of every command without a Node start-up
 * apiece (test/cli/cli.test.ts spawns bin/gatehouse.mjs itself for the top-level help and version).
 * usage: node test/cli/help-runner.ts '<JSON array of argv arrays>'
 */
import { main } from '../../cli/main.ts';

const lists = JSON.parse(process.argv[2] ?? '[]') as string[][];
const results: { argv: string[]; code: number; stdout: string; stderr: string }[] = [];
const realOut = process.stdout.write.bind(process.stdout);
const realErr = process.stderr.write.bind(process.stderr);
for (const argv of lists) {
  let stdout = '';
  let stderr = '';
  process.stdout.write = ((s: string | Uint8Array) => ((stdout += String(s)), true)) as typeof process.stdout.write;
  process.stderr.write = ((s: string | Uint8Array) => ((stderr += String(s)), true)) as typeof process.stderr.write;
  let code: number;
  try {
    code = await main(argv);
  } finally {
    process.stdout.write = realOut;
    process.stderr.write = realErr;
  }
  results.push({ argv, code, stdout, stderr });
}
realOut(JSON.stringify(results));
