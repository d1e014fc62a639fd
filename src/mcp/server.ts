/** One McpServer per request (stateless): every isolate can serve every call. */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { ToolContext } from './context.ts';
import { registerExecute } from './tools/execute.ts';
import { registerRuntimeExecute } from './tools/runtime-execute.ts';
import { registerQueryOutput } from './tools/query-output-tool.ts';
import { registerPolicyCheck } from './tools/policy-check.ts';
import { registerListRuntimes } from './tools/list-runtimes.ts';
import { registerRunScript } from './tools/run-script.ts';

export const SERVER_INFO = { name: 'gatehouse', version: '0.1.0' };

export function buildServer(ctx: ToolContext): McpServer {
  const server = new McpServer(SERVER_INFO, {
    capabilities: { tools: {} },
    instructions:
      'Gatehouse runs commands for your team under its policy, in gVisor sandboxes on the team\'s executor agents. ' +
      'Prefer runtime_execute with outputMode "minimal", then query_output on the artifactHandle when you need to see output. ' +
      'Use policy_check to learn why something would be denied.',
  });
  registerExecute(server, ctx);
  registerRuntimeExecute(server, ctx);
  registerQueryOutput(server, ctx);
  registerPolicyCheck(server, ctx);
  registerListRuntimes(server, ctx);
  registerRunScript(server, ctx);
  return server;
}
