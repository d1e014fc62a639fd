/**
 * make runs the workspace Makefile's recipes with a shell: allow it only for trusted workspaces.
 * What the caller adds is screened: `--eval`/`-E` text, a makefile read from stdin, assignments
 * that replace the shell or its flags (`SHELL=`, `.SHELLFLAGS=`, `MAKEFLAGS=`, …), `VAR != cmd`
 * shell assignments, values carrying shell syntax (`;`, `|`, `&`, `` ` ``, `$(`, `#`, redirects),
 * and variables that name a program make's built-in rules run (`CC`, `CXX`, `AR`, `LD`, …):
 * those may only name one executable the policy itself allows (`CC=clang`), never a command line.
 */
import { argDenied, type Screen } from './common.ts';
import { scanOptions, type GetoptSpec } from './getopt.ts';

const SHELL_VARS =
  /^(?:SHELL|\.SHELLFLAGS|MAKESHELL|MAKEFLAGS|MFLAGS|GNUMAKEFLAGS|MAKEFILES|MAKE|MAKEFILE_LIST|\.RECIPEPREFIX|\.ONESHELL|\.DEFAULT|\.INCLUDE_DIRS|BASH_ENV|ENV|MAKE_COMMAND|SUFFIXES|\.SUFFIXES)$/;
/**
 * Variables GNU make's built-in rules run as programs (`make -p -f /dev/null` lists them), plus
 * the usual build-system ones. One list: the make screen and the presets' documentation use it.
 */
const MAKE_PROGRAM_VARS: readonly string[] = [
  'AR',
  'AS',
  'CC',
  'CXX',
  'CPP',
  'FC',
  'F77',
  'M2C',
  'PC',
  'CO',
  'GET',
  'LEX',
  'YACC',
  'LINT',
  'MAKEINFO',
  'TEX',
  'TEXI2DVI',
  'WEAVE',
  'CWEAVE',
  'TANGLE',
  'CTANGLE',
  'RM',
  'LD',
  'OBJC',
  'GO',
  'RUSTC',
  'CARGO',
  'INSTALL',
  'STRIP',
  'RANLIB',
  'NM',
  'OBJCOPY',
  'OBJDUMP',
  'PKG_CONFIG',
  'PYTHON',
  'PERL',
  'CHECKOUT,v',
  'COMPILE.c',
  'LINK.o',
  'PREPROCESS.S',
  'ARFLAGS_PROGRAM',
  'HOSTCC',
  'CROSS_COMPILE',
];
const PROGRAM_VAR = new Set(MAKE_PROGRAM_VARS);
/** Variables whose names say they hold a command (`LINK.c`, `COMPILE.cc`, `*_COMMAND`). */
const COMMAND_LIKE = /^(?:COMPILE|LINK|PREPROCESS|OUTPUT_OPTION)\.|(?:_COMMAND|_CMD|_PROG|_PROGRAM)$/;
const STDIN = /^(?:-|\/dev\/stdin|\/dev\/fd\/0|\/proc\/(?:self|thread-self|\d+)\/fd\/0)$/;

/** GNU make 4.3's options that take a value. */
const MAKE_SPEC: GetoptSpec = {
  shortValued: 'CfIoWE',
  shortOptional: 'jlO',
  long: {
    directory: 'required',
    file: 'required',
    makefile: 'required',
    'include-dir': 'required',
    'old-file': 'required',
    'assume-old': 'required',
    'what-if': 'required',
    'new-file': 'required',
    'assume-new': 'required',
    eval: 'required',
    jobs: 'optional',
    'load-average': 'optional',
    'max-load': 'optional',
    'output-sync': 'optional',
    debug: 'optional',
    'jobserver-auth': 'required',
    'jobserver-style': 'required',
    shuffle: 'optional',
  },
};

export const screenMake: Screen = (args, ctx) => {
  const no = (a: string, why: string) => argDenied(a, ctx.base, why);
  for (const t of scanOptions(args, MAKE_SPEC)) {
    if (t.kind === 'long') {
      if (t.name === 'eval' || (!t.known && 'eval'.startsWith(t.name))) return no(t.arg, 'it evaluates caller-supplied make syntax, which can run commands');
      const isFile = t.known ? t.name === 'file' || t.name === 'makefile' : false;
      if (isFile && t.value !== undefined && STDIN.test(t.value)) return no(t.arg, 'it reads the makefile from stdin, which the policy cannot screen');
      continue;
    }
    if (t.kind === 'short') {
      if (t.letter === 'E') return no(t.arg, 'it evaluates caller-supplied make syntax, which can run commands');
      if (t.letter === 'f' && t.value !== undefined && STDIN.test(t.value))
        return no(t.arg, 'it reads the makefile from stdin, which the policy cannot screen');
      continue;
    }
    const a = t.arg;
    const assign = /^([^=\s-][^=\s]*?)\s*(::?=|:::=|\+=|\?=|!=|=)(.*)$/s.exec(a);
    if (!assign) continue;
    const [, rawName, op, value] = assign;
    const name = rawName.trim();
    if (op === '!=') return no(a, 'a != assignment runs a shell command');
    if (SHELL_VARS.test(name)) return no(a, 'it replaces the shell or the flags make runs recipes with');
    if (/[;|&`<>\n#\\]|\$/.test(value)) return no(a, 'the value carries shell or make syntax that recipes would run');
    if (PROGRAM_VAR.has(name) || COMMAND_LIKE.test(name)) {
      const word = value.trim();
      if (!/^[A-Za-z0-9_][A-Za-z0-9_.+-]*$/.test(word) || !ctx.isAllowedExecutable(word)) {
        return no(a, `${name} names the program make's rules run; it may only be one executable name the policy allows`);
      }
    }
  }
  return null;
};
