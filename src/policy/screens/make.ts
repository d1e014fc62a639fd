/**
 * make runs the workspace Makefile's recipes with a shell: allow it only for trusted workspaces.
 * What the caller adds is screened: `--eval`/`-E` text, a makefile read from stdin, assignments
 * that replace the shell or its flags (`SHELL=`, `.SHELLFLAGS=`, `MAKEFLAGS=`, …), `VAR != cmd`
 * shell assignments, and values carrying shell syntax (`;`, `|`, `&`, `` ` ``, `$(`, redirects).
 * A value naming another program (`CC=foo`) is not screened: the sandbox is the boundary there.
 */
import { argDenied, type Screen } from './common.ts';
import { clusterFind, isLong, longOption, shortCluster } from './options.ts';

const SHELL_VARS = /^(?:SHELL|\.SHELLFLAGS|MAKESHELL|MAKEFLAGS|MFLAGS|GNUMAKEFLAGS|MAKEFILES|MAKE|MAKEFILE_LIST|\.RECIPEPREFIX|\.ONESHELL|\.DEFAULT|\.INCLUDE_DIRS|BASH_ENV|ENV)$/;
const STDIN = /^(?:-|\/dev\/stdin|\/dev\/fd\/0|\/proc\/(?:self|thread-self|\d+)\/fd\/0)$/;

export const screenMake: Screen = (args, ctx) => {
  const no = (a: string, why: string) => argDenied(a, ctx.base, why);
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (isLong(a, 'eval', { abbrev: true })) return no(a, 'it evaluates caller-supplied make syntax, which can run commands');
    for (const f of ['file', 'makefile']) {
      if (isLong(a, f, { abbrev: true, exact: ['f'] })) {
        const v = longOption(a)!.value ?? args[i + 1];
        if (v !== undefined && STDIN.test(v)) return no(a, 'it reads the makefile from stdin, which the policy cannot screen');
      }
    }
    const cluster = shortCluster(a);
    if (cluster) {
      if (clusterFind(cluster, 'E', 'fCIoWOjl')) return no(a, 'it evaluates caller-supplied make syntax, which can run commands');
      const at = cluster.indexOf('f');
      if (at >= 0 && clusterFind(cluster, 'f', 'CIoWOjlE')) {
        const v = cluster.length > at + 1 ? cluster.slice(at + 1) : args[i + 1];
        if (v !== undefined && STDIN.test(v)) return no(a, 'it reads the makefile from stdin, which the policy cannot screen');
      }
      continue;
    }
    const assign = /^([^=\s-][^=\s]*?)\s*(::?=|:::=|\+=|\?=|!=|=)(.*)$/s.exec(a);
    if (assign && !a.startsWith('-')) {
      const [, name, op, value] = assign;
      if (op === '!=') return no(a, 'a != assignment runs a shell command');
      if (SHELL_VARS.test(name.trim())) return no(a, 'it replaces the shell or the flags make runs recipes with');
      if (/[;|&`<>\n]|\$[({]|\$\$/.test(value)) return no(a, 'the value carries shell syntax that recipes would run');
    }
  }
  return null;
};
