/**
 * In-process policy decision time: `decide` with the default policy (no OPA) over a mix of
 * allowed and denied requests, timed one call at a time with performance.now().
 */
import { decide, type PolicyRequest } from '../src/policy/engine.ts';
import { DEFAULT_POLICY } from '../src/policy/default-policy.ts';

const base = { tool: 'execute', mode: 'argv', team: 'bench', subject: 'bench' } as const;
const MIX: PolicyRequest[] = [
  { ...base, command: 'ls', args: ['-la'] },
  { ...base, command: 'git', args: ['log', '--oneline', '-n', '20'] },
  { ...base, command: 'python3', args: ['scripts/report.py', '--verbose'], cwd: './tools//', env: { LANG: 'C.UTF-8' } },
  { ...base, command: 'sed', args: ['-n', 's/foo/bar/gp', 'README.md'] },
  { ...base, command: 'true', args: [], timeoutMs: 10_000_000 },
  { ...base, command: 'find', args: ['.', '-name', '*.ts', '-exec', 'rm', '{}', ';'] },
  { ...base, command: 'git', args: ['-c', 'core.pager=sh', 'log'] },
  { ...base, command: 'curl', args: ['http://127.0.0.1'] },
  { ...base, command: 'ls', args: [], cwd: '../..' },
  { ...base, command: 'ls', args: [], env: { LD_PRELOAD: '/tmp/x.so' } },
  { ...base, mode: 'shell', command: 'ls; rm -rf /', args: [] },
  { ...base, tool: 'runtime_execute', mode: 'code', runtime: 'python', command: 'python3', args: [], code: 'print(1)' },
];

export async function benchPolicy(iterations: number): Promise<{ medianUs: number; p99Us: number }> {
  for (let i = 0; i < 200; i++) await decide(DEFAULT_POLICY, MIX[i % MIX.length]); // warm-up (JIT, regex caches)
  const samples = new Float64Array(iterations);
  for (let i = 0; i < iterations; i++) {
    const req = MIX[i % MIX.length];
    const t0 = performance.now();
    await decide(DEFAULT_POLICY, req);
    samples[i] = (performance.now() - t0) * 1000;
  }
  samples.sort();
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))];
  return { medianUs: at(0.5), p99Us: at(0.99) };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const r = await benchPolicy(Number(process.argv[2] ?? 20_000));
  console.log(`policy decision (in-process, default policy): median ${r.medianUs.toFixed(1)} µs, p99 ${r.p99Us.toFixed(1)} µs`);
}
