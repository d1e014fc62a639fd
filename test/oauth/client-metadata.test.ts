/**
 * The checks on every fetch the OAuth provider makes (src/oauth/client-metadata.ts), with the network replaced by a
 * function: which client URLs are refused before a request leaves, that a redirect is refused rather than followed,
 * and that only fetches inside withClientFetchGuard are checked (the gateway's own loopback JWKS/OPA fetches are not).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { checkedClientFetch, refuseClientUrl, withClientFetchGuard } from '../../src/oauth/client-metadata.ts';

describe('client URLs fetched for the OAuth provider', () => {
  it.each([
    ['http://app.example/client.json', 'client_url_not_https'],
    ['https://127.0.0.1/c.json', 'client_url_not_public'],
    ['https://0x7f.1/c.json', 'client_url_not_public'],
    ['https://2130706433/c.json', 'client_url_not_public'],
    ['https://[::1]/c.json', 'client_url_not_public'],
    ['https://[::ffff:10.0.0.1]/c.json', 'client_url_not_public'],
    ['https://0.0.0.0/c.json', 'client_url_not_public'],
    ['https://100.64.0.1/c.json', 'client_url_not_public'],
    ['https://192.168.1.10/c.json', 'client_url_not_public'],
    ['https://[fe80::1]/c.json', 'client_url_not_public'],
    ['https://localhost./c.json', 'client_url_not_public'],
    ['https://app.localhost/c.json', 'client_url_not_public'],
    ['https://printer.local/c.json', 'client_url_not_public'],
    ['https://router.home.arpa/c.json', 'client_url_not_public'],
    ['https://intranet/c.json', 'client_url_not_public'],
  ])('refuses %s (%s)', (url, code) => {
    expect(refuseClientUrl(url)?.code).toBe(code);
  });

  it.each(['https://app.example.com/oauth/client.json', 'https://93.184.215.14/client.json', 'https://[2606:4700::1111]/c.json'])('allows %s', (url) => {
    expect(refuseClientUrl(url)).toBeNull();
  });

  it('asks the network not to follow redirects and refuses a redirect with where it pointed', async () => {
    const transport = vi.fn(async (req: Request) => {
      expect(req.redirect).toBe('manual');
      return new Response(null, { status: 301, headers: { Location: 'https://10.0.0.1/c.json' } });
    });
    await expect(checkedClientFetch('https://app.example/c.json', undefined, transport as unknown as typeof fetch)).rejects.toThrow(
      'https://app.example/c.json answered a redirect (HTTP 301 to https://10.0.0.1/c.json)',
    );
  });

  it('never sends a request for a refused URL', async () => {
    const transport = vi.fn();
    await expect(checkedClientFetch('https://169.254.169.254/latest', undefined, transport as unknown as typeof fetch)).rejects.toThrow(/linkLocal address/);
    expect(transport).not.toHaveBeenCalled();
  });
});

describe('withClientFetchGuard', () => {
  const realFetch = globalThis.fetch;
  afterEach(() => {
    globalThis.fetch = realFetch;
  });

  it('checks the global fetch inside the guard only', async () => {
    const seen: string[] = [];
    globalThis.fetch = (async (input: RequestInfo | URL) => {
      seen.push(new Request(input).url);
      return new Response('{}');
    }) as typeof fetch;
    await expect(withClientFetchGuard(() => fetch('https://127.0.0.1:9/jwks.json'))).rejects.toThrow(/loopback address/);
    expect(seen).toEqual([]);
    await fetch('http://127.0.0.1:9/jwks.json');
    expect(seen).toEqual(['http://127.0.0.1:9/jwks.json']);
  });
});
