/**
 * Prompts a person can pick in an MCP client. `investigate_output` starts the way Gatehouse
 * wants outputs read: search the stored artifact with query_output instead of pulling it whole.
 */
import { z } from 'zod';
import type { McpServer } from '@modelcontextprotocol/server';
import { artifactUri } from './resources.ts';

/** Built once per isolate: every request's server registers the prompt with it. */
const InvestigateArgs = z.object({
  artifactHandle: z.string().min(1).max(200).describe('The artifactHandle / artifact_handle a tool result gave'),
  question: z.string().max(2000).optional().describe('What to find out; default: why it failed'),
});

export function registerPrompts(server: McpServer): void {
  server.registerPrompt(
    'investigate_output',
    {
      title: "Investigate a job's output",
      description: 'Find out why a job failed (or answer a question about its output) by searching its stored stdout/stderr with query_output.',
      argsSchema: InvestigateArgs,
    },
    ({ artifactHandle, question }) => ({
      messages: [
        {
          role: 'user' as const,
          content: {
            type: 'text' as const,
            text:
              `${question ?? 'Why did this job fail?'}\n\n` +
              `The job's output is stored as artifact ${artifactHandle}. Do not read it whole: call query_output with ` +
              `artifactHandle "${artifactHandle}" and a few queryTerms (start with error, fail, exception, denied; stream "both"), ` +
              `widen contextLines around what you find, and quote the lines your answer rests on. ` +
              `The first part of each stream is also readable as ${artifactUri(artifactHandle, 'stdout')} and ${artifactUri(artifactHandle, 'stderr')}.`,
          },
        },
      ],
    }),
  );
}
