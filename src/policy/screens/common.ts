/** Shared shape of a built-in argument screen: null to pass, else the reason it denies. */
export interface ScreenContext {
  /** The executable as requested (`/usr/bin/git` or `git`). */
  exe: string;
  /** Its basename, which is what screens are keyed by. */
  base: string;
  /** `argumentRules[exe].allowInlineCode`: interpreters' inline-code flags are then permitted. */
  allowInlineCode: boolean;
  /** Code mode: the agent puts the code file first, so the arguments are the program's own. */
  codeMode: boolean;
  /** Whether the policy's executable allowlist admits this bare name (make's `CC=clang`). */
  isAllowedExecutable: (name: string) => boolean;
  /** `git.repositoryPrograms = "disable"`: git must not reach configuration the agent did not list (submodules). */
  gitHardened?: boolean;
}

export type Screen = (args: readonly string[], ctx: ScreenContext) => string | null;

export function argDenied(arg: string, base: string, why: string): string {
  return `Argument "${clip(arg)}" is not allowed for ${base}: ${why}`;
}

export function inlineDenied(arg: string, ctx: ScreenContext, what = 'it runs inline code'): string {
  const key = ctx.exe.includes('/') ? ctx.exe : ctx.base;
  return argDenied(arg, ctx.base, `${what}; a policy may permit it with argumentRules["${key}"].allowInlineCode = true`);
}

function clip(s: string): string {
  return s.length > 80 ? `${s.slice(0, 80)}…` : s;
}
