/**
 * Stage 5: the cwd jail, lexically. `./a//b/` → `a/b`; '' is the workspace root. Absolute paths,
 * `..` segments, NUL/control characters and backslashes (Windows separators, `..\..`) are refused
 * outright rather than "fixed". The agent re-checks the realpath, which also covers symlinks.
 */
import { visible } from '../contracts/visible-text.ts';
import { deny, pass, type StageResult } from './types.ts';

export function checkCwd(cwd: string | undefined): StageResult<string> {
  if (cwd === undefined) return pass('');
  const refuse = () => deny(`Relative CWD "${visible(cwd)}" contains path traversal or absolute path components`);
  if (/[\u0000-\u001f\u007f\\]/.test(cwd)) return refuse();
  if (cwd.startsWith('/') || cwd.startsWith('~') || /^[A-Za-z]:/.test(cwd)) return refuse();
  const parts = cwd.split('/').filter((s) => s !== '' && s !== '.');
  if (parts.some((s) => s === '..')) return refuse();
  return pass(parts.join('/'));
}
