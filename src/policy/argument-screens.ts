/**
 * Stage 4 for argv/code mode: built-in screens for known escapes (always on), then the policy's
 * own `argumentRules[exe].deny` regexes. Screens are keyed by the executable's basename, so
 * `/usr/bin/git` gets git's. What each screen refuses is documented in its module under screens/.
 */
import type { PolicyDocument } from '../contracts/policy.ts';
import { executableBase } from '../contracts/runtimes.ts';
import { screenAwk } from './screens/awk.ts';
import type { Screen, ScreenContext } from './screens/common.ts';
import { compilerScreen } from './screens/compilers.ts';
import { screenFind } from './screens/find.ts';
import { screenGit } from './screens/git.ts';
import { interpreterScreen } from './screens/interpreters.ts';
import { launcherReason } from './screens/launchers.ts';
import { screenMake } from './screens/make.ts';
import { programOptionsScreen } from './screens/program-options.ts';
import { screenSed } from './screens/sed.ts';
import { screenTar } from './screens/tar.ts';
import { isAllowed } from './executables.ts';
import { deny, pass, type StageResult } from './types.ts';

// A Map, not an object literal: an executable called `__proto__` must find nothing.
const BY_NAME = new Map<string, Screen>([
  ['find', screenFind],
  ['git', screenGit],
  ['tar', screenTar],
  ['gtar', screenTar],
  ['bsdtar', screenTar],
  ['sed', screenSed],
  ['gsed', screenSed],
  ['awk', screenAwk],
  ['gawk', screenAwk],
  ['mawk', screenAwk],
  ['nawk', screenAwk],
  ['original-awk', screenAwk],
  ['make', screenMake],
  ['gmake', screenMake],
]);

/** Built-in screens that apply to an executable basename, most specific first. */
function builtinScreens(base: string): Screen[] {
  const out: Screen[] = [];
  const named = BY_NAME.get(base);
  if (named) out.push(named);
  for (const s of [programOptionsScreen(base), compilerScreen(base), interpreterScreen(base)]) if (s) out.push(s);
  return out;
}

/** The policy's rule for an executable: by the exact request (`/usr/bin/git`) first, then by basename. */
export function ruleFor(policy: PolicyDocument, exe: string): PolicyDocument['argumentRules'][string] | undefined {
  const rules = policy.argumentRules;
  // Own keys only: an executable called `__proto__` or `constructor` must not find Object's.
  if (Object.hasOwn(rules, exe)) return rules[exe];
  const base = executableBase(exe);
  return Object.hasOwn(rules, base) ? rules[base] : undefined;
}

export function screenArguments(policy: PolicyDocument, exe: string, args: readonly string[], o: { codeMode?: boolean } = {}): StageResult {
  const base = executableBase(exe);
  const launcher = launcherReason(base);
  if (launcher) return deny(launcher);
  for (let i = 0; i < args.length; i++) {
    if (typeof args[i] !== 'string') return deny(`Argument ${i + 1} is not a string`);
    if (args[i].includes('\u0000')) return deny(`Argument ${i + 1} contains a NUL byte, which cannot be passed to a program`);
  }
  const rule = ruleFor(policy, exe);
  const ctx: ScreenContext = {
    exe,
    base,
    allowInlineCode: rule?.allowInlineCode ?? false,
    codeMode: o.codeMode ?? false,
    isAllowedExecutable: (name) => isAllowed(policy.executables.allow, name),
    gitHardened: policy.git.repositoryPrograms === 'disable',
  };
  for (const screen of builtinScreens(base)) {
    const reason = screen(args, ctx);
    if (reason) return deny(reason);
  }
  if (rule) {
    for (const [i, source] of rule.deny.entries()) {
      let re: RegExp;
      try {
        re = compiled(source);
      } catch {
        // parsePolicy rejects these; a stored one fails closed.
        return deny(`argumentRules["${exe}"].deny[${i}] is not a valid regular expression; fix the policy`);
      }
      const hit = args.find((a) => re.test(a));
      if (hit !== undefined)
        return deny(`Argument "${hit.length > 80 ? `${hit.slice(0, 80)}…` : hit}" is not allowed for ${base}: it matches the policy's deny rule /${source}/`);
    }
  }
  return pass(undefined);
}

const regexCache = new Map<string, RegExp>();
function compiled(source: string): RegExp {
  let re = regexCache.get(source);
  if (!re) {
    re = new RegExp(source);
    if (regexCache.size > 1000) regexCache.clear();
    regexCache.set(source, re);
  }
  return re;
}
