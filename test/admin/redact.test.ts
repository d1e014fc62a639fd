/** Audit redaction (pure function; runs in Node). */
import { describe, expect, it } from 'vitest';
import { redact } from '../../src/store/audit.ts';

describe('redact', () => {
  it('redacts env values whose names look secret, keeps the rest', () => {
    expect(redact({ env: { GITHUB_TOKEN: 'ghx', AWS_SECRET_ACCESS_KEY: 'k', DB_PASSWORD: 'p', LANG: 'C.UTF-8', CI: 'true' } })).toEqual({
      env: { GITHUB_TOKEN: '[redacted]', AWS_SECRET_ACCESS_KEY: '[redacted]', DB_PASSWORD: '[redacted]', LANG: 'C.UTF-8', CI: 'true' },
    });
  });

  it('redacts bearer values, JWTs and well-known API key shapes inside strings', () => {
    const jwt = 'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl';
    const out = JSON.stringify(
      redact({
        command: 'curl',
        args: ['--header', 'Authorization: Bearer sk-live-abcdef0123456789', jwt, 'ghp_abcdefghijklmnopqrstuvwxyz0123', 'AKIAABCDEFGHIJKLMNOP'],
      }),
    );
    for (const s of ['sk-live-abcdef0123456789', jwt, 'ghp_abcdefghijklmnopqrstuvwxyz0123', 'AKIAABCDEFGHIJKLMNOP']) expect(out).not.toContain(s);
    expect(out).toContain('Authorization: Bearer [redacted]');
  });

  it('redacts the value after a secret flag and name=value secrets', () => {
    expect(redact(['mysql', '--password', 'hunter2', '--user', 'bob'])).toEqual(['mysql', '--password', '[redacted]', '--user', 'bob']);
    expect(redact('deploy --token=abc123 API_KEY=xyz PASSWORD="a b" mode=fast')).toBe(
      'deploy --token=[redacted] API_KEY=[redacted] PASSWORD=[redacted] mode=fast',
    );
    expect(redact('git clone https://bob:s3cret@example.com/repo.git')).toBe('git clone https://bob:[redacted]@example.com/repo.git');
  });

  it('leaves ordinary commands alone', () => {
    const cmd = { mode: 'argv', command: 'git', args: ['log', '--oneline', '-n', '5'], cwd: 'src', timeoutMs: 1000 };
    expect(redact(cmd)).toEqual(cmd);
  });
});
