/**
 * One 2026-07-28 JSON-RPC request over Streamable HTTP, exactly as a client sends it: the
 * per-request `_meta` envelope (protocol version, client info, client capabilities), the
 * `MCP-Protocol-Version` / `Mcp-Method` / `Mcp-Name` headers, and an answer read from JSON or
 * SSE. The Tasks tests use it where the SDK client cannot speak task traffic (the ext-tasks
 * client takes it as its `rawDispatch`), and to send exactly what an attacker would.
 */
export const PROTOCOL_VERSION = '2026-07-28';
const TASKS_EXT = 'io.modelcontextprotocol/tasks';
export const CLIENT_INFO = { name: 'gatehouse-tasks-test', version: '1.0.0' };

/** The `Mcp-Name` header mirrors this body field for these methods. */
const NAME_FIELD: Record<string, string> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
};

export interface JsonRpcResponse {
  jsonrpc: '2.0';
  id: number | string | null;
  result?: Record<string, unknown>;
  error?: { code: number; message: string; data?: unknown };
}

let nextId = 1;

export function capabilities(declareTasks: boolean): Record<string, unknown> {
  return declareTasks ? { extensions: { [TASKS_EXT]: {} } } : {};
}

/** Adds the 2026 envelope to a request's params (keeping any `_meta` the caller set). */
function framed(params: Record<string, unknown> | undefined, declareTasks: boolean): Record<string, unknown> {
  const meta = (params?._meta ?? {}) as Record<string, unknown>;
  return {
    ...params,
    _meta: {
      'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION,
      'io.modelcontextprotocol/clientInfo': CLIENT_INFO,
      'io.modelcontextprotocol/clientCapabilities': capabilities(declareTasks),
      ...meta,
    },
  };
}

/** POSTs one JSON-RPC request message (already framed) and returns its response message. */
export async function post(
  mcpUrl: string,
  token: string,
  message: { id?: number | string; method: string; params?: Record<string, unknown> },
  signal?: AbortSignal,
): Promise<JsonRpcResponse> {
  const headers: Record<string, string> = {
    Authorization: `Bearer ${token}`,
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    'MCP-Protocol-Version': PROTOCOL_VERSION,
    'Mcp-Method': message.method,
  };
  const field = NAME_FIELD[message.method];
  const name = field ? message.params?.[field] : undefined;
  if (typeof name === 'string') headers['Mcp-Name'] = name;
  const body = { jsonrpc: '2.0', id: message.id ?? nextId++, method: message.method, ...(message.params ? { params: message.params } : {}) };
  const r = await fetch(mcpUrl, { method: 'POST', headers, body: JSON.stringify(body), signal });
  const text = await r.text();
  if ((r.headers.get('content-type') ?? '').includes('text/event-stream')) {
    // The response is the last `data:` event that carries our id (notifications come before it).
    const events = text
      .split(/\r?\n\r?\n/)
      .map((e) =>
        e
          .split(/\r?\n/)
          .filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(5).trimStart())
          .join('\n'),
      )
      .filter(Boolean);
    for (const e of events.reverse()) {
      const m = JSON.parse(e) as JsonRpcResponse;
      if (m.id === body.id && ('result' in m || 'error' in m)) return m;
    }
    throw new Error(`no response for ${message.method} in the SSE stream (HTTP ${r.status}): ${text.slice(0, 500)}`);
  }
  try {
    return JSON.parse(text) as JsonRpcResponse;
  } catch {
    throw new Error(`${message.method}: HTTP ${r.status}: ${text.slice(0, 500)}`);
  }
}

/** A framed request; `declareTasks` puts the Tasks extension in this request's client capabilities. */
export function request(
  mcpUrl: string,
  token: string,
  method: string,
  params: Record<string, unknown> | undefined,
  declareTasks: boolean,
): Promise<JsonRpcResponse> {
  return post(mcpUrl, token, { method, params: framed(params, declareTasks) });
}
