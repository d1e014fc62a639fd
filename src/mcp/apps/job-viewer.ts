/**
 * MCP Apps: the tools that run jobs point hosts at a `ui://` view of the job's output (live tail,
 * search), which the host renders beside the result. Hosts without MCP Apps ignore the metadata.
 *
 * ```ts
 * registerJobViewer(server);                         // the ui:// resource
 * server.registerTool('execute', { …, _meta: JOB_VIEWER_TOOL_META }, handler);
 * ```
 */
import type { McpServer } from '@modelcontextprotocol/server';
import { RESOURCE_MIME_TYPE, RESOURCE_URI_META_KEY, registerAppResource } from '@modelcontextprotocol/ext-apps/server';
// The view's document as the build made it: page.html with its script (job-viewer-client/main.ts) bundled inline.
import JOB_VIEWER_HTML from '../../../build/apps/job-viewer.html.txt';

export const JOB_VIEWER_URI = 'ui://gatehouse/job-output.html';

/** `_meta` of a tool whose result the viewer shows (the nested form, plus the flat key older hosts read). */
export const JOB_VIEWER_TOOL_META = { ui: { resourceUri: JOB_VIEWER_URI }, [RESOURCE_URI_META_KEY]: JOB_VIEWER_URI };

/** The resource as `resources/read` answers it (the dashboard's job page frames the same document under the same CSP). */
export const JOB_VIEWER_CONTENT = {
  uri: JOB_VIEWER_URI,
  mimeType: RESOURCE_MIME_TYPE,
  text: JOB_VIEWER_HTML,
  // No network of its own: every read goes through the host's tools/call.
  _meta: { ui: { csp: { connectDomains: [] as string[], resourceDomains: [] as string[] }, prefersBorder: true } },
};

export function registerJobViewer(server: McpServer): void {
  registerAppResource(
    server,
    'Job output viewer',
    JOB_VIEWER_URI,
    { description: 'Live output of a Gatehouse job, with search (reads through job_status, job_output and query_output).' },
    async () => ({ contents: [JOB_VIEWER_CONTENT] }),
  );
}
