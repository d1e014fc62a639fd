/** The HTTP status of one MCP `initialize` with `token`: what a client's first request meets (200, or 401 for a refused token). */
export async function initializeStatus(mcpUrl: string, token: string): Promise<number> {
  const r = await fetch(mcpUrl, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'gatehouse-test', version: '1' } },
    }),
  });
  await r.body?.cancel();
  return r.status;
}
