/**
 * wrangler imports a `.txt` file as its text (its default module rules; vitest.config.ts does the same for the
 * tests): the script isolate's runner, built into build/isolate/runner.txt (scripts/build-isolate-runner.ts), and the
 * MCP Apps job view, built into build/apps/job-viewer.html.txt (scripts/build-job-viewer.ts).
 */
declare module '*.txt' {
  const text: string;
  export default text;
}
