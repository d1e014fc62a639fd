/**
 * The runtime table (the governed-runtime contract, docs/architecture.md): which executables a runtime accepts and how code mode
 * writes, builds and runs a source file. The edge uses it for runtime↔executable
 * compatibility; the agent uses it to probe toolchains and to run code mode.
 */
import { z } from 'zod';

export const RUNTIME_NAMES = [
  'node',
  'typescript',
  'python',
  'shell',
  'ruby',
  'php',
  'perl',
  'r',
  'elixir',
  'go',
  'java',
  'kotlin',
  'rust',
  'c',
  'cpp',
  'csharp',
] as const;
export const RuntimeName = z.enum(RUNTIME_NAMES);
export type RuntimeName = z.infer<typeof RuntimeName>;

export interface RuntimeDef {
  name: RuntimeName;
  kind: 'interpreted' | 'compiled';
  /** Executable names this runtime accepts, preferred first. */
  executables: string[];
  /** Arguments that print the toolchain version (probed by the agent). */
  versionArgs: string[];
  /** Code mode: file the source is written to (inside the job's private directory). */
  codeFile: string;
  /** Code mode build step, if any; `{file}` and `{out}` are substituted. Compile errors stop here. */
  build?: string[];
  /** Code mode run step; `{exe}` is the resolved executable, `{file}`/`{out}` as above. */
  run: string[];
  /** Debian package that provides it, for the "install X" error and docs/tools.md. */
  debianPackage: string;
  /** Env names this runtime needs beyond PATH/HOME/TMPDIR (set by the agent to sandbox paths). */
  env?: Record<string, string>;
}

export const RUNTIMES: Record<RuntimeName, RuntimeDef> = {
  node: {
    name: 'node',
    kind: 'interpreted',
    executables: ['node', 'bun'],
    versionArgs: ['--version'],
    codeFile: 'main.mjs',
    run: ['{exe}', '{file}'],
    debianPackage: 'nodejs',
  },
  // Debian's tsc compiles to JavaScript that the sandbox's node runs (its node, 20, has no type stripping).
  // Type errors are compile errors; Node's own type declarations are not installed (`declare const process: any`).
  typescript: {
    name: 'typescript',
    kind: 'compiled',
    executables: ['tsc'],
    versionArgs: ['--version'],
    codeFile: 'main.ts',
    build: ['{exe}', '--target', 'es2020', '--module', 'commonjs', '--outDir', '{out}', '{file}'],
    run: ['node', '{out}/main.js'],
    debianPackage: 'node-typescript',
  },
  python: {
    name: 'python',
    kind: 'interpreted',
    executables: ['python3', 'python'],
    versionArgs: ['--version'],
    codeFile: 'main.py',
    run: ['{exe}', '{file}'],
    debianPackage: 'python3',
  },
  shell: {
    name: 'shell',
    kind: 'interpreted',
    executables: ['bash', 'sh', 'dash'],
    versionArgs: ['--version'],
    codeFile: 'main.sh',
    run: ['{exe}', '{file}'],
    debianPackage: 'bash',
  },
  ruby: {
    name: 'ruby',
    kind: 'interpreted',
    executables: ['ruby'],
    versionArgs: ['--version'],
    codeFile: 'main.rb',
    run: ['{exe}', '{file}'],
    debianPackage: 'ruby',
  },
  php: {
    name: 'php',
    kind: 'interpreted',
    executables: ['php'],
    versionArgs: ['--version'],
    codeFile: 'main.php',
    run: ['{exe}', '{file}'],
    debianPackage: 'php-cli',
  },
  perl: {
    name: 'perl',
    kind: 'interpreted',
    executables: ['perl'],
    versionArgs: ['--version'],
    codeFile: 'main.pl',
    run: ['{exe}', '{file}'],
    debianPackage: 'perl',
  },
  r: {
    name: 'r',
    kind: 'interpreted',
    executables: ['Rscript'],
    versionArgs: ['--version'],
    codeFile: 'main.R',
    run: ['{exe}', '{file}'],
    debianPackage: 'r-base-core',
  },
  elixir: {
    name: 'elixir',
    kind: 'interpreted',
    executables: ['elixir'],
    versionArgs: ['--version'],
    codeFile: 'main.exs',
    run: ['{exe}', '{file}'],
    debianPackage: 'elixir',
  },
  go: {
    name: 'go',
    kind: 'compiled',
    executables: ['go'],
    versionArgs: ['version'],
    codeFile: 'main.go',
    build: ['{exe}', 'build', '-o', '{out}', '{file}'],
    run: ['{out}'],
    debianPackage: 'golang-go',
    env: { GOCACHE: '/tmp/go-cache', GOPATH: '/tmp/go' },
  },
  java: {
    name: 'java',
    kind: 'compiled',
    executables: ['java'],
    versionArgs: ['-version'],
    codeFile: 'Main.java',
    run: ['{exe}', '{file}'],
    debianPackage: 'default-jdk-headless',
  },
  kotlin: {
    name: 'kotlin',
    kind: 'compiled',
    executables: ['kotlinc', 'kotlin'],
    versionArgs: ['-version'],
    codeFile: 'main.kts',
    run: ['{exe}', '-script', '{file}'],
    debianPackage: 'kotlin',
  },
  rust: {
    name: 'rust',
    kind: 'compiled',
    executables: ['rustc'],
    versionArgs: ['--version'],
    codeFile: 'main.rs',
    build: ['{exe}', '-o', '{out}', '{file}'],
    run: ['{out}'],
    debianPackage: 'rustc',
  },
  c: {
    name: 'c',
    kind: 'compiled',
    executables: ['cc', 'gcc', 'clang'],
    versionArgs: ['--version'],
    codeFile: 'main.c',
    build: ['{exe}', '-o', '{out}', '{file}'],
    run: ['{out}'],
    debianPackage: 'gcc',
  },
  cpp: {
    name: 'cpp',
    kind: 'compiled',
    executables: ['c++', 'g++', 'clang++'],
    versionArgs: ['--version'],
    codeFile: 'main.cpp',
    build: ['{exe}', '-o', '{out}', '{file}'],
    run: ['{out}'],
    debianPackage: 'g++',
  },
  // Mono's C# compiler (C# 7: a class with a static Main, no top-level statements), run by mono.
  csharp: {
    name: 'csharp',
    kind: 'compiled',
    executables: ['mcs'],
    versionArgs: ['--version'],
    codeFile: 'main.cs',
    build: ['{exe}', '-nologo', '-out:{out}.exe', '{file}'],
    run: ['mono', '{out}.exe'],
    debianPackage: 'mono-mcs',
  },
};

/** The executable name without directories: `/usr/bin/python3` → `python3`. */
export function executableBase(exe: string): string {
  const i = exe.lastIndexOf('/');
  return i >= 0 ? exe.slice(i + 1) : exe;
}

export function isCompatible(runtime: RuntimeName, exe: string): boolean {
  return RUNTIMES[runtime].executables.includes(executableBase(exe));
}
