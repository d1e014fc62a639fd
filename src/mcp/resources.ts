/**
 * Job outputs as MCP resources: `gatehouse://artifacts/{handle}/{stream}` reads a stream of a
 * job's artifact (the first READ_CAP_BYTES; query_output searches the rest), and resources/list
 * names the team's newest ones (from the team's artifact index; artifacts indexed in D1 before the
 * index moved there are readable by handle, not listed). Only the caller's team's artifacts exist
 * here, as for query_output: another team's handle is "not found".
 */
import { ProtocolError, ProtocolErrorCode, ResourceNotFoundError, ResourceTemplate, type McpServer } from '@modelcontextprotocol/server';
import { artifactRows, readHead, recentArtifacts } from '../dispatch/artifact-client.ts';
import type { ToolContext } from '../governed/call-context.ts';

/** How much of a stream one resources/read returns; a larger output is searched with query_output. */
const READ_CAP_BYTES = 1024 * 1024;
/** How many artifact streams resources/list names (newest first). */
const LIST_LIMIT = 50;
const TEMPLATE = 'gatehouse://artifacts/{handle}/{stream}';

export function artifactUri(handle: string, stream: string): string {
  return `gatehouse://artifacts/${encodeURIComponent(handle)}/${stream}`;
}

export function registerArtifactResources(server: McpServer, ctx: ToolContext): void {
  const canRead = ctx.principal.scopes.includes('artifacts:read');
  server.registerResource(
    'artifact',
    new ResourceTemplate(TEMPLATE, {
      list: async () => {
        if (!canRead) return { resources: [] };
        const rows = await recentArtifacts(ctx.env, ctx.principal.team, LIST_LIMIT);
        return {
          resources: rows.map((r) => ({
            uri: artifactUri(r.handle, r.stream),
            name: `${r.handle}/${r.stream}`,
            title: `${r.stream} of job ${r.jobId}`,
            mimeType: 'text/plain',
            size: r.bytes,
          })),
        };
      },
    }),
    {
      title: 'Job output',
      description: `The stdout or stderr of a job, by the artifactHandle its tool result gave (first ${READ_CAP_BYTES} bytes; search all of it with query_output).`,
      mimeType: 'text/plain',
      // A stored output never changes: the caller may keep what it read until the artifact expires.
      cacheHint: { ttlMs: 3_600_000, cacheScope: 'private' },
    },
    async (uri, variables) => {
      if (!canRead) {
        throw new ProtocolError(
          ProtocolErrorCode.InvalidParams,
          `insufficient_scope: reading job output needs a token with scope "artifacts:read"; this token has ${ctx.principal.scopes.join(', ') || 'no scopes'}`,
        );
      }
      const handle = decodeURIComponent(String(variables.handle ?? ''));
      const stream = String(variables.stream ?? '');
      if (stream !== 'stdout' && stream !== 'stderr') {
        throw new ProtocolError(
          ProtocolErrorCode.InvalidParams,
          `unknown stream "${stream}": use ${artifactUri(handle, 'stdout')} or ${artifactUri(handle, 'stderr')}`,
        );
      }
      const row = (await artifactRows(ctx.env, ctx.principal.team, handle)).find((r) => r.stream === stream);
      if (!row) throw new ResourceNotFoundError(uri.href, `not found: no ${stream} for artifact "${handle}" in this team (it may have expired)`);
      const text = await readHead(ctx.env, ctx.principal.team, row, READ_CAP_BYTES);
      return {
        contents: [{ uri: uri.href, mimeType: 'text/plain', text }],
        _meta: { totalBytes: row.bytes, totalLines: row.lines, truncated: row.bytes > READ_CAP_BYTES },
      };
    },
  );
}
