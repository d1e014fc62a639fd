/** The gateway's [vars] are parsed once: defaults when unset, a config_error naming the var and what it allows otherwise. */
import { describe, expect, it } from 'vitest';
import { DEFAULT_HEARTBEAT_MS, DEFAULT_MAX_BODY_BYTES, gatewayConfig } from '../../src/platform/config.ts';

const problem = (env: Parameters<typeof gatewayConfig>[0]) => {
  const r = gatewayConfig(env);
  if (r.ok) throw new Error(`expected a config error for ${JSON.stringify(env)}`);
  expect(r.code).toBe('config_error');
  return r.message;
};

describe('gatewayConfig', () => {
  it('gives the defaults when nothing is set', () => {
    expect(gatewayConfig({})).toEqual({
      ok: true,
      config: { maxBodyBytes: DEFAULT_MAX_BODY_BYTES, heartbeatMs: DEFAULT_HEARTBEAT_MS, plan: 'paid', origins: { exact: [], wildcard: [] }, hosts: [] },
    });
  });

  it('reads every var as wrangler.toml writes it', () => {
    const r = gatewayConfig({
      MAX_BODY_BYTES: '65536',
      HEARTBEAT_MS: ' 1000 ',
      GATEHOUSE_WORKERS_PLAN: 'free',
      ALLOWED_ORIGINS: 'https://App.example.com/, http://localhost:5173, https://*.example.org',
      ALLOWED_HOSTS: 'Gatehouse.example.com, 10.0.0.5:8787',
    });
    expect(r).toEqual({
      ok: true,
      config: {
        maxBodyBytes: 65536,
        heartbeatMs: 1000,
        plan: 'free',
        origins: { exact: ['https://app.example.com', 'http://localhost:5173'], wildcard: [['https', '.example.org']] },
        hosts: ['gatehouse.example.com', '10.0.0.5:8787'],
      },
    });
  });

  it('refuses a value the var does not allow, naming the var, the value and what is allowed', () => {
    expect(problem({ MAX_BODY_BYTES: '1mb' })).toBe(
      'MAX_BODY_BYTES is "1mb"; allowed: a whole number from 1024 to 100000000 bytes (Cloudflare reads at most 100000000 of a request body); set it in wrangler.toml [vars]',
    );
    expect(problem({ MAX_BODY_BYTES: '200000000' })).toMatch(/^MAX_BODY_BYTES is "200000000"; allowed: a whole number from 1024 to 100000000 bytes/);
    expect(problem({ MAX_BODY_BYTES: '-5' })).toMatch(/^MAX_BODY_BYTES is "-5"/);
    expect(problem({ HEARTBEAT_MS: '50' })).toBe(
      'HEARTBEAT_MS is "50"; allowed: a whole number from 100 to 60000 milliseconds; set it in wrangler.toml [vars]',
    );
    expect(problem({ HEARTBEAT_MS: '1e3' })).toMatch(/^HEARTBEAT_MS is "1e3"/);
    expect(problem({ GATEHOUSE_WORKERS_PLAN: 'enterprise' })).toMatch(/^Error: GATEHOUSE_WORKERS_PLAN is "enterprise"; allowed: "paid"/);
    expect(problem({ ALLOWED_ORIGINS: 'https://ok.example.com, app.example.com' })).toMatch(
      /^ALLOWED_ORIGINS has "app.example.com"; allowed: comma-separated origins/,
    );
    expect(problem({ ALLOWED_ORIGINS: 'https://a.example.com/path' })).toMatch(/^ALLOWED_ORIGINS has "https:\/\/a.example.com\/path"/);
    expect(problem({ ALLOWED_HOSTS: 'https://gatehouse.example.com' })).toMatch(
      /^ALLOWED_HOSTS has "https:\/\/gatehouse.example.com"; allowed: comma-separated host names/,
    );
  });

  it('parses one env object once', () => {
    const env = { HEARTBEAT_MS: '2000' };
    const a = gatewayConfig(env);
    env.HEARTBEAT_MS = '3000';
    expect(gatewayConfig(env)).toBe(a);
  });
});
