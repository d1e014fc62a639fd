/**
 * The CSPs the dashboard sends: its own page frames nothing but the MCP Apps view, and the view gets
 * the CSP its resource declares, where a declared origin can never add a directive, a keyword or a
 * second source.
 */
import { describe, expect, it } from 'vitest';
import { APP_FRAME_PATH, appFrameCsp, dashboardCsp } from '../../src/dashboard/headers.ts';

const directives = (csp: string) => Object.fromEntries(csp.split('; ').map((d) => [d.split(' ')[0], d.split(' ').slice(1).join(' ')]));

describe('dashboard CSP', () => {
  it('allows scripts and styles from its origin only and frames only the MCP Apps view of this origin', () => {
    const d = directives(dashboardCsp('https://gw.example'));
    expect(d['script-src']).toBe("'self'");
    expect(d['style-src']).toBe("'self'");
    expect(d['frame-src']).toBe(`https://gw.example${APP_FRAME_PATH}`);
    expect(d['frame-ancestors']).toBe("'none'");
  });
});

describe('the MCP Apps view CSP', () => {
  it('with no declared origins: no network, no frames, no base, framed only by the dashboard', () => {
    const d = directives(appFrameCsp({ connectDomains: [], resourceDomains: [] }, 'https://gw.example'));
    expect(d['connect-src']).toBe("'none'");
    expect(d['frame-src']).toBe("'none'");
    expect(d['base-uri']).toBe("'none'");
    expect(d['script-src']).toBe("'unsafe-inline'");
    expect(d['frame-ancestors']).toBe('https://gw.example');
  });

  it('drops a declared origin that would add a directive, a keyword or a second source', () => {
    const csp = appFrameCsp(
      {
        connectDomains: [
          'https://api.example',
          "https://x.example; script-src 'unsafe-eval'",
          'https://a.example https://b.example',
          "'unsafe-eval'",
          'https://c.example\nreport-uri x',
        ],
        resourceDomains: ['https://cdn.example', '*; default-src *'],
      },
      'https://gw.example',
    );
    const d = directives(csp);
    expect(d['connect-src']).toBe('https://api.example');
    expect(d['script-src']).toBe("'unsafe-inline' https://cdn.example");
    expect(csp).not.toMatch(/unsafe-eval|report-uri|b\.example|default-src \*/);
    expect(csp.split('; ').filter((x) => x.startsWith('script-src'))).toHaveLength(1);
  });
});
