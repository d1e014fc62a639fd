/**
 * Turns a submitted script into the module the isolate runs: size check, TypeScript types
 * stripped (sucrase) when the text is not plain JavaScript, parsed (acorn), and instrumented so
 * every loop iteration and function entry calls a budget guard. The guard is what stops a
 * `while (true) {}` where the platform's CPU limit is not enforced (local workerd); on Cloudflare
 * the isolate's `limits.cpuMs` stops it too.
 *
 * Two shapes of script are accepted:
 * - a body: top-level statements, `await` and a top-level `return` whose value is the result;
 * - a module: `export default` a function (its awaited result is the result) or a value.
 */
import * as acorn from 'acorn';
import { transform } from 'sucrase';
import { CODE_MAX_BYTES } from './limits.ts';

interface PreparedScript {
  /** Source of the isolate module `script.js`. Its default export is an async function giving the result. */
  source: string;
  kind: 'body' | 'module';
  typescript: boolean;
  /** Name of the guard binding inside `source` (random per script, so a script cannot shadow it). */
  guardName: string;
}

export type PrepareResult = { ok: true; value: PreparedScript } | { ok: false; code: 'invalid_argument' | 'syntax_error'; message: string };

export function codeBytes(code: string): number {
  return new TextEncoder().encode(code).byteLength;
}

export function prepareScript(code: string, guardName: string = randomGuardName()): PrepareResult {
  if (codeBytes(code) > CODE_MAX_BYTES) return { ok: false, code: 'invalid_argument', message: `Code size exceeds limit (${CODE_MAX_BYTES} bytes)` };
  let text = code;
  let typescript = false;
  let ast = tryParse(text);
  if (!ast.ok) {
    // Not JavaScript: perhaps TypeScript. Types are stripped, line numbers kept; a TS-only
    // construct sucrase cannot strip is reported with the JavaScript parser's message.
    let stripped: string | undefined;
    try {
      stripped = transform(code, { transforms: ['typescript'], disableESTransforms: true, keepUnusedImports: true }).code;
    } catch {
      stripped = undefined;
    }
    const again = stripped === undefined ? undefined : tryParse(stripped);
    if (!again?.ok) return { ok: false, code: 'syntax_error', message: `SyntaxError: ${ast.message}` };
    text = stripped!;
    typescript = true;
    ast = again;
  }
  const program = ast.program;
  const isModule = program.body.some((n) => n.type === 'ImportDeclaration' || n.type.startsWith('Export'));
  if (isModule && hasTopLevelReturn(program)) {
    return {
      ok: false,
      code: 'syntax_error',
      message: 'SyntaxError: a script is either a module (export default …) or a body with a top-level return, not both',
    };
  }
  const instrumented = instrument(text, program, guardName);
  const prologue = `const ${guardName} = globalThis[${JSON.stringify(guardName)}]; delete globalThis[${JSON.stringify(guardName)}];\n`;
  const source = isModule
    ? `${prologue}${instrumented}\n`
    : // One line of prologue, then the body inside an async function: line numbers shift by two.
      `${prologue}export default async function __gatehouse_script() {\n${instrumented}\n}\n`;
  if (isModule && !program.body.some((n) => n.type === 'ExportDefaultDeclaration')) {
    return {
      ok: false,
      code: 'syntax_error',
      message: 'SyntaxError: a module script must have an `export default` (a function whose result is returned, or a value)',
    };
  }
  return { ok: true, value: { source, kind: isModule ? 'module' : 'body', typescript, guardName } };
}

function randomGuardName(): string {
  const b = crypto.getRandomValues(new Uint8Array(9));
  return `__gh_guard_${Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')}`;
}

type Parsed = { ok: true; program: acorn.Program } | { ok: false; message: string };

function tryParse(text: string): Parsed {
  try {
    const program = acorn.parse(text, {
      ecmaVersion: 'latest',
      sourceType: 'module',
      allowReturnOutsideFunction: true,
      allowAwaitOutsideFunction: true,
      locations: false,
    });
    return { ok: true, program };
  } catch (e) {
    return { ok: false, message: e instanceof Error ? e.message : String(e) };
  }
}

function hasTopLevelReturn(program: acorn.Program): boolean {
  let found = false;
  walk(program, 0, (node) => {
    if (node.type === 'ReturnStatement') found = true;
    // Do not descend into functions: their returns are their own.
    return !isFunction(node);
  });
  return found;
}

const LOOPS = new Set(['ForStatement', 'ForInStatement', 'ForOfStatement', 'WhileStatement', 'DoWhileStatement']);

function isFunction(n: acorn.Node): boolean {
  return n.type === 'FunctionDeclaration' || n.type === 'FunctionExpression' || n.type === 'ArrowFunctionExpression';
}

interface Edit {
  pos: number;
  text: string;
  /** Openers of outer nodes go first at a shared position; closers of inner nodes go first. */
  depth: number;
  closer: boolean;
}

/** Inserts `guard();` at the start of every loop body and function body. */
function instrument(text: string, program: acorn.Program, guard: string): string {
  const call = `${guard}();`;
  const edits: Edit[] = [];
  walk(program, 0, (node, depth) => {
    if (LOOPS.has(node.type)) {
      const body = (node as acorn.Node & { body: acorn.Node }).body;
      if (body.type === 'BlockStatement') edits.push({ pos: body.start + 1, text: call, depth, closer: false });
      else {
        edits.push({ pos: body.start, text: `{${call}`, depth, closer: false });
        edits.push({ pos: body.end, text: '}', depth, closer: true });
      }
    } else if (isFunction(node)) {
      const body = (node as acorn.Node & { body: acorn.Node }).body;
      if (body.type === 'BlockStatement') edits.push({ pos: body.start + 1, text: call, depth, closer: false });
      else {
        // Arrow with an expression body: `x => expr` becomes `x => (guard(), expr)`.
        edits.push({ pos: body.start, text: `(${guard}(), `, depth, closer: false });
        edits.push({ pos: body.end, text: ')', depth, closer: true });
      }
    }
    return true;
  });
  edits.sort((a, b) => a.pos - b.pos || Number(b.closer) - Number(a.closer) || (a.closer ? b.depth - a.depth : a.depth - b.depth));
  let out = '';
  let at = 0;
  for (const e of edits) {
    out += text.slice(at, e.pos) + e.text;
    at = e.pos;
  }
  return out + text.slice(at);
}

/** Depth-first walk over every child node; `visit` returns false to skip a node's children. */
function walk(node: acorn.Node, depth: number, visit: (n: acorn.Node, depth: number) => boolean): void {
  if (!visit(node, depth)) return;
  for (const key of Object.keys(node)) {
    if (key === 'type' || key === 'start' || key === 'end' || key === 'loc' || key === 'range') continue;
    const v = (node as unknown as Record<string, unknown>)[key];
    if (Array.isArray(v)) {
      for (const c of v) if (isNode(c)) walk(c, depth + 1, visit);
    } else if (isNode(v)) walk(v, depth + 1, visit);
  }
}

function isNode(v: unknown): v is acorn.Node {
  return typeof v === 'object' && v !== null && typeof (v as { type?: unknown }).type === 'string' && typeof (v as { start?: unknown }).start === 'number';
}
