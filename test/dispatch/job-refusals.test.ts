import { describe, expect, it } from 'vitest';
import { concurrencyLimitMessage } from '../../src/dispatch/job-refusals.ts';

describe('job refusals', () => {
  it('concurrencyLimitMessage uses the reference text', () => {
    expect(concurrencyLimitMessage(2, 2)).toBe('Concurrency limit reached (2/2 active jobs)');
  });
});
