/**
 * Stage 5: the cwd jail, lexically. `./a//b/` → `a/b`; '' is the workspace root. Absolute paths,
 * `..` segments, NUL/control characters and backslashes (Windows separators, `..\..`) are refused
 * outright rather than "fixed". The agent re-checks the realpath, which also covers symlinks.
 */
import { deny, pass, type StageResult } from './types.ts';

export function checkCwd(cwd: string | undefined): StageResult<string> {
  if (cwd === undefined) return pass('');
  const refuse = () => deny(`Relative CWD "${printable(cwd)}" contains path traversal or absolute path components`);
  if (/[\u0000-\u001f\u007f\\]/.test(cwd)) return refuse();
  if (cwd.startsWith('/') || cwd.startsWith('~') || /^[A-Za-z]:/.test(cwd)) return refuse();
  const parts = cwd.split('/').filter((s) => s !== '' && s !== '.');
  if (parts.some((s) => s === '..')) return refuse();
  return pass(parts.join('/'));
}

/** Control characters would make the message itself misleading; show them escaped. */
function printable(s: string): string {
  return s.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}
