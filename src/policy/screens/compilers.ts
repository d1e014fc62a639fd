/**
 * Toolchains: options that make a compiler or build tool run a program of the caller's choosing
 * instead of (or besides) compiling — gcc/clang `-wrapper`, `-B`, `-specs`, `-fplugin`,
 * `-fuse-ld=/path`, response files (`@file`, which may hold any of these); rustc `-C linker=`,
 * `-Z`; go `-exec`, `-toolexec`, `-vettool`, `-ldflags -extld`, `go env -w`; the JVM's
 * `-XX:OnError`/`-XX:OnOutOfMemoryError` shell hooks.
 */
import { argDenied, type Screen } from './common.ts';

const CC = /^(?:cc|c\+\+|gcc|g\+\+|clang|clang\+\+|cpp|c89|c99|gcc-\d+|g\+\+-\d+|clang-\d+|clang\+\+-\d+|[\w.-]+-(?:gcc|g\+\+)(?:-\d+)?|tcc)$/;

/** Why a C-compiler argument is refused, or null. Shared with rustc's link-arg. */
function ccArgProblem(a: string, next: string | undefined): { arg: string; why: string } | null {
  if (a.startsWith('@')) return { arg: a, why: 'a response file can hold any option, unseen by the policy' };
  if (a === '-wrapper' || a.startsWith('-wrapper')) return { arg: a, why: "it runs the compiler's subprograms through an arbitrary program" };
  if (/^-B/.test(a) || a === '--prefix' || a.startsWith('--prefix='))
    return { arg: a, why: "it makes the driver run cc1/as/ld from a directory of the caller's choosing" };
  if (/^--?specs?(?:=|$)/.test(a)) return { arg: a, why: 'a specs file can make the driver run arbitrary programs' };
  if (/^-fplugin(?:-arg)?[=-]|^-fplugin$|^-fpass-plugin=/.test(a)) return { arg: a, why: 'it loads a compiler plugin (arbitrary code)' };
  if (/^-fuse-ld=.*\//.test(a) || /^--ld-path=/.test(a)) return { arg: a, why: 'it runs an arbitrary program as the linker' };
  if (a === '-Xclang' && next !== undefined && /^-(?:load|plugin|add-plugin)/.test(next))
    return { arg: `${a} ${next}`, why: 'it loads a compiler plugin (arbitrary code)' };
  if (/^-Wl,.*(?:--?plugin|-fuse-ld)/.test(a) || (a === '-Xlinker' && next !== undefined && /plugin/.test(next)))
    return { arg: a, why: 'it loads a linker plugin (arbitrary code)' };
  if (/^-print-prog-name=|^-no-integrated-cpp$|^-fdump-.*=|^-save-temps=/.test(a) && a.includes('/'))
    return { arg: a, why: 'it writes or runs files outside the build' };
  return null;
}

const screenCc: Screen = (args, ctx) => {
  for (let i = 0; i < args.length; i++) {
    const p = ccArgProblem(args[i], args[i + 1]);
    if (p) return argDenied(p.arg, ctx.base, p.why);
  }
  return null;
};

const screenRustc: Screen = (args, ctx) => {
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a.startsWith('@')) return argDenied(a, ctx.base, 'a response file can hold any option, unseen by the policy');
    if (a === '-Z' || a.startsWith('-Z')) return argDenied(a, ctx.base, 'unstable options can load code (codegen backends, LLVM plugins)');
    let cg: string | undefined;
    if (a === '-C' || a === '--codegen') cg = args[i + 1];
    else if (a.startsWith('--codegen=')) cg = a.slice('--codegen='.length);
    else if (a.startsWith('-C')) cg = a.slice(2);
    if (cg === undefined) continue;
    const [key, value = ''] = cg.split(/=(.*)/s);
    const k = key.replace(/_/g, '-');
    const shown = a === '-C' || a === '--codegen' ? `${a} ${cg}` : a;
    if (k === 'linker' || k === 'llvm-args' || k === 'codegen-backend')
      return argDenied(shown, ctx.base, 'it runs an arbitrary program as the linker or loads code into the compiler');
    if (k === 'link-arg' || k === 'link-args') {
      for (const part of value.split(/\s+/)) {
        const p = ccArgProblem(part, undefined);
        if (p) return argDenied(shown, ctx.base, `the linker argument ${p.arg}: ${p.why}`);
      }
    }
  }
  return null;
};

const screenGo: Screen = (args, ctx) => {
  const sub = args.find((a) => !a.startsWith('-'));
  if (sub === 'env' && args.some((a) => a === '-w' || a === '-u' || a === '--w' || a === '--u')) {
    return argDenied('-w', ctx.base, 'go env -w changes the toolchain configuration (CC, GOFLAGS, …) for every later command');
  }
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const m = /^--?(exec|toolexec|vettool|ldflags|gcflags|asmflags|gccgoflags|overlay|compiler)(?:=(.*))?$/s.exec(a);
    if (!m) continue;
    const [, name, attached] = m;
    if (name === 'exec' || name === 'toolexec' || name === 'vettool')
      return argDenied(a, ctx.base, 'it runs an arbitrary program in place of (or around) the built binary or tools');
    if (name === 'ldflags') {
      const v = attached ?? args[i + 1] ?? '';
      if (/-extld|-extldflags|-linkmode|-tmpdir/.test(v))
        return argDenied(attached !== undefined ? a : `${a} ${v}`, ctx.base, 'it runs an arbitrary program as the external linker');
    }
    if (name === 'gccgoflags' || name === 'compiler') return argDenied(a, ctx.base, 'it changes which compiler program runs');
  }
  return null;
};

const JVM_HOOK = /-XX:\+?(?:OnError|OnOutOfMemoryError)\b|-XX:CompileCommand(?:File)?=|-XX:Flags=|-XX:VMOptionsFile=|-agentpath:|-agentlib:jdwp/;

const screenJvm: Screen = (args, ctx) => {
  for (const a of args) {
    if (a.startsWith('@')) return argDenied(a, ctx.base, 'an argument file can hold any option, unseen by the policy');
    if (JVM_HOOK.test(a)) return argDenied(a, ctx.base, 'it makes the JVM run a shell command or load native code');
  }
  return null;
};

export function compilerScreen(base: string): Screen | undefined {
  if (CC.test(base)) return screenCc;
  if (base === 'rustc') return screenRustc;
  if (base === 'go') return screenGo;
  if (/^(?:java|javac|jshell|kotlin|kotlinc|kotlinc-jvm|scala|scalac|groovy|groovyc|jar|javadoc)$/.test(base)) return screenJvm;
  return undefined;
}
