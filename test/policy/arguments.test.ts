import { describe, expect, it } from 'vitest';
import { awkProgramProblem } from '../../src/policy/screens/awk.ts';
import { sedScriptProblem } from '../../src/policy/screens/sed.ts';
import { check, policy, run } from './helpers.ts';

const EXES = [
  'find',
  'git',
  'tar',
  'sed',
  'awk',
  'gawk',
  'mawk',
  'make',
  'sort',
  'split',
  'zip',
  'rsync',
  'ssh',
  'wget',
  'node',
  'python3',
  'python',
  'perl',
  'ruby',
  'php',
  'bash',
  'sh',
  'Rscript',
  'elixir',
  'erl',
  'kotlinc',
  'lua',
  'julia',
  'pwsh',
  'vim',
  'deno',
  'bun',
  'tsx',
  'gcc',
  'cc',
  'clang',
  'rustc',
  'go',
  'java',
  'javac',
  'diff',
  'sdiff',
  'env',
  'xargs',
  'nice',
  'timeout',
  'nohup',
  'stdbuf',
  'setsid',
  'chroot',
  'sudo',
  'su',
  'busybox',
  'ld-linux-x86-64.so.2',
  'ls',
  'cat',
  '/usr/bin/git',
];
const P = policy({ executables: { allow: EXES } });

/** Every entry must be denied at the arguments stage. */
const BYPASSES: string[][] = [
  // find
  ['find', '.', '-exec', 'sh', '-c', 'id', ';'],
  ['find', '.', '-execdir', 'id', ';'],
  ['find', '.', '-ok', 'id', ';'],
  ['find', '.', '-okdir', 'id', ';'],
  ['find', '.', '-delete'],
  ['find', '.', '-fprint', '/tmp/x'],
  ['find', '.', '-fprint0', 'x'],
  ['find', '.', '-fprintf', 'x', '%p'],
  ['find', '.', '-fls', 'x'],
  // git
  ['git', '-c', 'core.pager=sh -c id', 'log'],
  ['git', '-ccore.pager=id', 'log'],
  ['git', '--config-env=core.pager=X', 'log'],
  ['git', '--config-env', 'core.pager=X', 'log'],
  ['git', 'fetch', '--upload-pack=touch /tmp/x', 'origin'],
  ['git', 'clone', '--upload-pack', 'id', 'x', 'y'],
  ['git', 'clone', '-u', 'id', 'x', 'y'],
  ['git', 'ls-remote', '-u', 'id', 'x'],
  ['git', 'ls-remote', '--exec=id', 'x'],
  ['git', 'fetch', '--exec=id', 'x'],
  ['git', 'push', '--receive-pack=id', 'x'],
  ['git', 'fetch', '--upload-p=id', 'origin'],
  ['git', 'clone', 'ext::sh -c id', 'x'],
  ['git', 'fetch', 'EXT::sh', 'main'],
  ['git', 'submodule', 'add', 'ext::sh', 'x'],
  ['git', 'config', 'core.sshCommand', 'id'],
  ['git', 'config', 'core.pager', 'id'],
  ['git', 'config', '--global', 'core.fsmonitor', 'id'],
  ['git', 'config', 'alias.x', '!id'],
  ['git', 'config', 'core.hooksPath', '.'],
  ['git', 'config', 'filter.x.clean', 'id'],
  ['git', 'config', 'diff.x.textconv', 'id'],
  ['git', 'config', 'credential.helper', '!id'],
  ['git', 'config', 'url.ext::sh.insteadOf', 'https://'],
  ['git', 'config', 'include.path', '/tmp/cfg'],
  ['git', 'config', '--edit'],
  ['git', 'clone', '--config', 'core.pager=id', 'x', 'y'],
  ['git', 'clone', '-c', 'core.pager=id', 'x', 'y'],
  ['git', 'clone', '--template=/tmp/t', 'x', 'y'],
  ['git', 'rebase', '--exec', 'id', 'main'],
  ['git', 'rebase', '-x', 'id', 'main'],
  ['git', 'bisect', 'run', 'id'],
  ['git', 'submodule', 'foreach', 'id'],
  ['git', 'filter-branch', '--tree-filter', 'id'],
  ['git', 'difftool', '--extcmd=id'],
  ['git', 'difftool', '-x', 'id'],
  ['git', 'grep', '-O', 'x'],
  ['git', 'grep', '--open-files-in-pager=id', 'x'],
  ['git', '--exec-path=/tmp', 'status'],
  ['git', 'send-email', 'x'],
  ['/usr/bin/git', '-c', 'core.pager=id', 'log'],
  ['git', '-C', 'sub', '-c', 'core.pager=id', 'log'],
  // tar
  ['tar', '--checkpoint-action=exec=sh', '-cf', 'x.tar', '.'],
  ['tar', '--checkpoint=1', '--checkpoint-act=exec=id', '-cf', 'x.tar', '.'],
  ['tar', '--to-command=sh', '-xf', 'x.tar'],
  ['tar', '--to-com=sh', '-xf', 'x.tar'],
  ['tar', '--use-compress-program=sh', '-cf', 'x', '.'],
  ['tar', '--use=sh', '-cf', 'x', '.'],
  ['tar', '-I', 'sh', '-cf', 'x', '.'],
  ['tar', '-cIf', 'sh', 'x', '.'],
  ['tar', 'cIf', 'x', 'sh', '.'],
  ['tar', '--info-script=sh', '-cf', 'x', '.'],
  ['tar', '-F', 'sh', '-cf', 'x'],
  ['tar', '--new-volume-script=sh', '-cf', 'x'],
  ['tar', '--rsh-command=sh', '-cf', 'h:x'],
  ['tar', '--rmt-command=sh', '-cf', 'h:x'],
  // sed
  ['sed', '1e id'],
  ['sed', '-n', 'e id'],
  ['sed', 's/x/id/e'],
  ['sed', '-e', 's/x/id/ge'],
  ['sed', '--expression=e id', 'f'],
  ['sed', '--expr', '1e id', 'f'],
  ['sed', '-ne', '1e id'],
  ['sed', 'w /tmp/out'],
  ['sed', 's/a/b/w out.sh'],
  ['sed', '-f', 'script.sed', 'x'],
  ['sed', '--file=script.sed'],
  ['sed', '-n', '/x/{e id\n}'],
  ['sed', 'p;e id'],
  ['sed', '$!N;1e id'],
  ['sed', 'b end; e id'],
  ['sed', '1!e id'],
  ['sed', 'y/abc/xyz/;e'],
  ['sed', 's|a|b|;e'],
  // awk
  ['awk', 'BEGIN { system("id") }'],
  ['awk', 'BEGIN { print "x" | "sh" }'],
  ['awk', 'BEGIN { "id" | getline x; print x }'],
  ['gawk', 'BEGIN { print |& "sh" }'],
  ['awk', '-f', 'prog.awk', 'x'],
  ['gawk', '--file=prog.awk'],
  ['gawk', '-e', 'BEGIN{system("id")}'],
  ['gawk', '--source=BEGIN{system("id")}'],
  ['gawk', '-l', 'filefuncs', '1'],
  ['gawk', '@load "x"; BEGIN{}'],
  ['mawk', '-W', 'exec', 'prog'],
  ['awk', '-F:', '{ print $1 | "sh" }', '/etc/passwd'],
  ['awk', '-v', 'x=1', 'BEGIN{system ("id")}'],
  ['awk', '{ x++ / 2 | "sh" }'],
  ['awk', '{ print $1 > "f"; print "a" | "cat" }'],
  // make
  ['make', '--eval=all:;id'],
  ['make', '--ev', 'x:;id'],
  ['make', '-E', 'all:;id'],
  ['make', 'SHELL=/bin/bash'],
  ['make', '.SHELLFLAGS=-c id;'],
  ['make', 'X!=id'],
  ['make', 'CC=gcc; id'],
  ['make', 'CFLAGS=$(shell id)'],
  ['make', 'CFLAGS=`id`'],
  ['make', '-f', '-'],
  ['make', '--file=/dev/stdin'],
  ['make', 'MAKEFLAGS=--eval=x'],
  // other tools that run a program
  ['sort', '--compress-program=sh', 'x'],
  ['sort', '--compress=sh', 'x'],
  ['split', '--filter=sh', 'x'],
  ['zip', '-TT', 'sh', 'x.zip', 'x'],
  ['zip', '--unzip-command=sh', 'x.zip'],
  ['rsync', '-e', 'sh -c id', 'a', 'b'],
  ['rsync', '--rsh=id', 'a', 'b'],
  ['rsync', '--rsync-path=id', 'a', 'b'],
  ['ssh', '-o', 'ProxyCommand=id', 'h'],
  ['ssh', '-oLocalCommand=id', 'h'],
  ['wget', '--use-askpass=id', 'u'],
  ['wget', '-e', 'x=y', 'u'],
  // launchers
  ['env', 'sh', '-c', 'id'],
  ['env'],
  ['xargs', 'sh'],
  ['nice', 'sh'],
  ['timeout', '5', 'sh'],
  ['nohup', 'sh'],
  ['stdbuf', '-o0', 'sh'],
  ['setsid', 'sh'],
  ['chroot', '/', 'sh'],
  ['sudo', 'id'],
  ['su', '-c', 'id'],
  ['busybox', 'sh'],
  ['ld-linux-x86-64.so.2', '/bin/sh'],
  // interpreters' inline code
  ['node', '-e', '1'],
  ['node', '--eval', '1'],
  ['node', '--eval=1'],
  ['node', '-p', '1'],
  ['node', '--print', '1'],
  ['node', '-pe', '1'],
  ['node', '--import', 'data:text/javascript,1'],
  ['node', '--import=x.mjs', 'a.js'],
  ['node', '-r', 'x', 'a.js'],
  ['node', '--require=x', 'a.js'],
  ['node', '--experimental-loader', 'x', 'a.js'],
  ['node', '--loader=x', 'a.js'],
  ['node', '--experimental_loader=x', 'a.js'],
  ['node', '-'],
  ['node', '/dev/stdin'],
  ['node', '-i'],
  ['node', '--env-file=.env', 'a.js'],
  ['tsx', '-e', '1'],
  ['tsx', '--eval', '1'],
  ['python3', '-c', 'print(1)'],
  ['python3', '-cprint(1)'],
  ['python3', '-Sc', 'print(1)'],
  ['python3', '-I', '-c', 'x'],
  ['python3', '-W', 'ignore', '-c', 'x'],
  ['python3', '-'],
  ['python', '-c', 'x'],
  ['python3', '-m', 'timeit', '__import__("os").system("id")'],
  ['python3', '-mcode'],
  ['python3', '-I', '-m', 'pdb', 'x.py'],
  ['node', '--test-reporter=data:text/javascript,1', '--test'],
  ['deno', 'run', '--import-map=data:application/json,{}', 'x.ts'],
  ['python3', '-i', 'x.py'],
  ['python3', '-u', '/dev/stdin'],
  ['python3', '--', '-'],
  ['perl', '-e', 'print 1'],
  ['perl', '-E', 'say 1'],
  ['perl', '-lne', 'print'],
  ['perl', '-wle', '1'],
  ['perl', '-Mstrict;system("id")', 'x.pl'],
  ['perl', '-ne', 'print'],
  ['ruby', '-e', 'p 1'],
  ['ruby', '-ne', 'p 1'],
  ['ruby', '-'],
  ['php', '-r', 'echo 1;'],
  ['php', '-nr', 'echo 1;'],
  ['php', '-R', 'echo 1;'],
  ['php', '-B', '1'],
  ['php', '-a'],
  ['php', '-d', 'auto_prepend_file=x.php', 'y.php'],
  ['php', '--run', '1'],
  ['bash', '-c', 'id'],
  ['sh', '-c', 'id'],
  ['bash', '-ec', 'id'],
  ['bash', '-o', 'posix', '-c', 'id'],
  ['bash', '-oc', 'posix', 'id'],
  ['bash', '-Oc', 'extglob', 'id'],
  ['bash', '-co', 'posix', 'id'],
  ['bash', '-oo', 'posix', 'posix', '-c', 'id'],
  ['bash', '-o', 'posix', '-o', 'posix', '-c', 'id'],
  ['bash', '+O', 'extglob', '-c', 'id'],
  ['bash', '-s'],
  ['bash', '-'],
  ['bash', '-i'],
  ['Rscript', '-e', '1'],
  ['elixir', '-e', '1'],
  ['elixir', '--eval', '1'],
  ['elixir', '-S', 'mix', 'run', '-e', '1'],
  ['elixir', '--rpc-eval', 'n', '1'],
  ['erl', '-eval', '1'],
  ['kotlinc', '-e', '1'],
  ['kotlinc', '-expression', '1'],
  ['lua', '-e', 'print(1)'],
  ['julia', '-e', '1'],
  ['pwsh', '-c', 'id'],
  ['pwsh', '-Command', 'id'],
  ['pwsh', '-EncodedCommand', 'aQBkAA=='],
  ['pwsh', '-comm', 'id'],
  ['vim', '-c', ':!id'],
  ['vim', '+:!id', 'x'],
  ['vim', '+10', 'x'],
  ['vim', '--cmd', '!id'],
  ['deno', 'eval', '1'],
  ['deno', 'run', 'data:text/javascript,1'],
  ['bun', '-e', '1'],
  // compilers
  ['gcc', '-wrapper', 'sh,-c,id', 'x.c'],
  ['gcc', '-B/tmp/evil', 'x.c'],
  ['gcc', '-B', '/tmp', 'x.c'],
  ['gcc', '-specs=x.specs', 'x.c'],
  ['gcc', '--specs=x', 'x.c'],
  ['cc', '@args.txt'],
  ['gcc', '-fplugin=./p.so', 'x.c'],
  ['clang', '-fuse-ld=/tmp/ld', 'x.c'],
  ['clang', '--ld-path=/tmp/ld', 'x.c'],
  ['clang', '-Xclang', '-load', 'p.so'],
  ['rustc', '-C', 'linker=/bin/sh', 'x.rs'],
  ['rustc', '-Clinker=sh', 'x.rs'],
  ['rustc', '--codegen', 'linker=sh', 'x.rs'],
  ['rustc', '-Z', 'codegen-backend=x.so', 'x.rs'],
  ['rustc', '@args'],
  ['rustc', '-C', 'link-arg=-fuse-ld=/tmp/ld', 'x.rs'],
  ['go', 'test', '-exec', 'sh', './...'],
  ['go', 'build', '-toolexec=sh', '.'],
  ['go', 'vet', '-vettool=/tmp/x', '.'],
  ['go', 'build', '-ldflags=-extld=sh', '.'],
  ['go', 'env', '-w', 'CC=sh'],
  ['java', '-XX:OnOutOfMemoryError=id', 'Main'],
  ['java', '-XX:OnError=id', 'Main'],
  ['java', '@argfile'],
  ['javac', '-J-XX:OnError=id', 'X.java'],
  // an option's value is never the end of the options (getopt takes `--` as the value)
  ['tar', '-c', '-f', '--', '--checkpoint=1', '--checkpoint-action=exec=id', '.'],
  ['tar', 'cf', '--', '--to-command=sh', '.'],
  ['tar', '-cf', '--', '-I', 'sh', '.'],
  ['sort', '-o', '--', '--compress-program=sh', 'f'],
  ['sort', '-S1K', '-o', '--', '--compress=sh', 'f'],
  ['split', '-l', '--', '--filter=sh', 'f'],
  ['git', 'clone', '--branch', '--', '--upload-pack=id', 'a', 'b'],
  ['git', 'clone', '-b', '--', '-uid', 'a', 'b'],
  ['git', 'fetch', '--depth', '--', '--upload-pack=id', 'a'],
  ['git', 'log', '--frobnicate', '--', '--ext-diff'],
  ['rsync', '-f', '--', '-e', 'sh', 'a', 'b'],
  ['make', '-f', '--', '--eval=x'],
  ['make', '-C', '--', '-E', 'x'],
  // config keys and options that name programs
  ['git', 'config', 'gpg.ssh.defaultKeyCommand', 'id'],
  ['git', 'config', 'gpg.ssh.program', 'id'],
  ['git', 'config', 'diff.external', 'id'],
  ['git', 'config', 'core.fsmonitor', 'id'],
  ['git', 'commit', '-S', '-m', 'x'],
  ['git', 'commit', '--gpg-sign', '-m', 'x'],
  ['git', 'tag', '-s', 'v1'],
  ['git', 'diff', '--ext-diff'],
  ['git', 'log', '-p', '--ext-diff'],
  ['git', 'show', '--ext'],
  ['make', '-f', '/dev/null', 'x', 'CC=touch m #'],
  ['make', 'CC=/tmp/evil'],
  ['make', 'CXX=evil'],
  ['make', 'LINK.c=evil'],
  ['make', 'CC=cc # x'],
  ['make', 'CFLAGS=-O2 #'],
  ['diff', '--diff-program=sh', 'a', 'b'],
  ['sdiff', '-o', '--', '--diff-program=sh', 'a', 'b'],
];

describe('built-in screens deny known escapes', () => {
  it.each(BYPASSES.map((a) => [a.join(' '), a] as const))('%s', async (_, argv) => {
    const d = await run(P, argv[0], ...argv.slice(1));
    expect(d.allowed, d.reason).toBe(false);
    expect(d.stage).toBe('arguments');
    expect(d.reason).toMatch(/^(Argument "|Executable ")/);
  });
});

/** Everyday uses of the same tools: all must pass. */
const EVERYDAY: string[][] = [
  ['find', '.', '-name', '*.ts', '-type', 'f'],
  ['find', '.', '-maxdepth', '2', '-print0'],
  ['find', '-L', '.', '-newer', 'x'],
  ['git', 'status'],
  ['git', 'log', '--oneline', '-n', '5'],
  ['git', 'diff', '--stat'],
  ['git', '-C', 'sub', 'status'],
  ['git', 'log', '--pretty=%H'],
  ['git', 'show', 'HEAD:filter.py'],
  ['git', 'add', 'hook.sh', 'alias.txt', 'filter.py'],
  ['git', 'commit', '-m', 'fix -c handling'],
  ['git', 'config', 'user.name', 'A'],
  ['git', 'config', '--get', 'user.email'],
  ['git', 'fetch', 'origin'],
  ['git', 'clone', '--depth', '1', 'https://example.com/x.git'],
  ['git', 'branch', '-u', 'origin/main'],
  ['git', 'difftool', '--tool-help'],
  ['git', 'rebase', 'main'],
  ['git', '--exec-path'],
  ['git', 'push', 'origin', 'HEAD'],
  ['tar', '-czf', 'x.tar.gz', 'src'],
  ['tar', 'xzf', 'x.tar.gz'],
  ['tar', '--checkpoint=100', '-cf', 'x.tar', '.'],
  ['tar', '-tvf', 'x.tar'],
  ['tar', '-C', 'out', '-xf', 'x.tar'],
  ['sed', '-n', 's/a/b/p', 'f'],
  ['sed', '-i', 's/foo/bar/g', 'x.txt'],
  ['sed', '-e', '1d', '-e', '$d'],
  ['sed', '/start/,/end/{s/x/y/;p}'],
  ['sed', '-E', 's/(a|b)+/c/g'],
  ['sed', 's/e/E/g'],
  ['sed', '/e/d'],
  ['sed', 'a\\\nhello e id'],
  ['sed', '1i header'],
  ['sed', 'y/e/E/'],
  ['sed', 's/x/y/w /dev/stdout'],
  ['sed', ':a;N;$!ba;s/\\n/ /g'],
  ['sed', 's/[/]/x/'],
  ['sed', '-n', 'l'],
  ['sed', '--expression=s/e/f/'],
  ['sed', '-i.bak', 's/a/b/', 'f'],
  ['awk', '{ print $1 }', 'f'],
  ['awk', '-F:', '{ print $1 }', '/etc/passwd'],
  ['awk', '/a|b/ { n++ } END { print n }'],
  ['awk', '{ split($0, a, "|"); print a[1] }'],
  ['awk', '$1 == "x" || $2 == "y"'],
  ['awk', '{ print $1 / 2 }'],
  ['awk', '{ print > "/dev/stderr" }'],
  ['gawk', '-v', 'x=1', 'BEGIN { print x }'],
  ['make'],
  ['make', 'CC=gcc'],
  ['make', 'CC=cc', 'CFLAGS=-O2'],
  ['git', 'clone', '--branch', 'main', 'a', 'b'],
  ['git', 'log', '--', 'path'],
  ['tar', '-cf', 'x.tar', '--', '-odd-name'],
  ['sort', '-o', 'out', '--', '-odd-name'],
  ['git', 'diff', '--no-ext-diff'],
  ['make', '-j4', 'test'],
  ['make', 'CFLAGS=-O2 -g', 'all'],
  ['make', '-C', 'sub', 'install', 'PREFIX=/tmp/p'],
  ['make', '-f', 'Other.mk'],
  ['sort', '-u', 'x'],
  ['sort', '--check', 'x'],
  ['zip', '-T', 'x.zip', 'x'],
  ['rsync', '-av', 'a/', 'b/'],
  ['ssh', '-o', 'BatchMode=yes', 'h'],
  ['node', 'script.js'],
  ['node', 'script.js', '-e', 'x'],
  ['node', '--test'],
  ['node', '--max-old-space-size=512', 'x.js'],
  ['node', '--enable-source-maps', 'x.js', '--print'],
  ['node', '--version'],
  ['tsx', 'x.ts'],
  ['python3', 'x.py'],
  ['python3', 'manage.py', '-c', 'conf'],
  ['python3', '-m', 'pytest', '-c', 'pytest.ini'],
  ['python3', '-u', 'x.py'],
  ['python3', '-W', 'ignore', 'x.py'],
  ['python3', '-X', 'dev', 'x.py', '-'],
  ['python3', '--version'],
  ['python3', '-OO', 'x.py'],
  ['python3', '-m', 'http.server'],
  ['python3', '-m', 'cProfile', 'x.py'],
  ['node', 'x.js', 'data:x'],
  ['perl', 'x.pl', '-e'],
  ['perl', '-w', 'x.pl'],
  ['perl', '-Mstrict', '-w', 'x.pl'],
  ['perl', '-MList::Util=sum', 'x.pl'],
  ['perl', '-I', 'lib', 'x.pl'],
  ['ruby', 'x.rb'],
  ['ruby', '-w', 'x.rb', '-e'],
  ['php', 'x.php'],
  ['php', '-d', 'memory_limit=1G', 'x.php'],
  ['php', 'x.php', '-r'],
  ['bash', 'script.sh'],
  ['bash', 'script.sh', '-c', 'x'],
  ['sh', '-e', 'script.sh'],
  ['bash', '-x', 'script.sh'],
  ['Rscript', 'x.R'],
  ['elixir', 'x.exs'],
  ['lua', 'x.lua'],
  ['julia', 'x.jl'],
  ['pwsh', '-File', 'x.ps1', '-c'],
  ['deno', 'run', 'x.ts'],
  ['bun', 'x.ts'],
  ['gcc', '-O2', '-Wall', '-o', 'x', 'x.c'],
  ['cc', '-lm', 'x.c'],
  ['clang', '-fuse-ld=lld', 'x.c'],
  ['rustc', '-C', 'opt-level=2', 'x.rs'],
  ['rustc', '-O', 'x.rs'],
  ['go', 'build', './...'],
  ['go', 'test', '-run', 'TestX', './...'],
  ['go', 'build', '-ldflags=-s -w', '.'],
  ['go', 'env', 'GOPATH'],
  ['java', '-Xmx512m', 'Main'],
  ['javac', 'X.java'],
  ['ls', '-la'],
  ['cat', '-e', 'x'],
  ['ls', '-c'],
  ['find', '.', '-name', 'constructor'],
  ['git', 'show', '__proto__'],
];

describe('built-in screens let everyday uses through', () => {
  it.each(EVERYDAY.map((a) => [a.join(' '), a] as const))('%s', async (_, argv) => {
    const d = await run(P, argv[0], ...argv.slice(1));
    expect(d.reason).toBe('Allowed by the team policy');
    expect(d.allowed).toBe(true);
  });
});

describe('reasons name the argument and why', () => {
  it('find -exec', async () => {
    expect((await run(P, 'find', '.', '-exec', 'id', ';')).reason).toBe('Argument "-exec" is not allowed for find: it runs arbitrary commands');
  });
  it('inline code says how a policy can permit it', async () => {
    expect((await run(P, 'python3', '-c', 'x')).reason).toBe(
      'Argument "-c" is not allowed for python3: it runs inline code; a policy may permit it with argumentRules["python3"].allowInlineCode = true',
    );
  });
  it('launchers say they run another program', async () => {
    expect((await run(P, 'env', 'sh')).reason).toContain('Executable "env" is not allowed: it runs another program');
  });
});

describe('argumentRules from the policy', () => {
  it("allowInlineCode permits an interpreter's inline code, and only that interpreter's", async () => {
    const p = policy({ executables: { allow: ['python3', 'node'] }, argumentRules: { python3: { allowInlineCode: true } } });
    expect((await run(p, 'python3', '-c', 'print(1)')).allowed).toBe(true);
    expect((await run(p, 'node', '-e', '1')).allowed).toBe(false);
  });
  it('allowInlineCode never lifts the built-in escape screens', async () => {
    const p = policy({
      executables: { allow: ['git', 'find', 'env'] },
      argumentRules: { git: { allowInlineCode: true }, find: { allowInlineCode: true }, env: { allowInlineCode: true } },
    });
    expect((await run(p, 'git', '-c', 'core.pager=id', 'log')).allowed).toBe(false);
    expect((await run(p, 'find', '.', '-exec', 'id', ';')).allowed).toBe(false);
    expect((await run(p, 'env', 'id')).allowed).toBe(false);
  });
  it('deny regexes are tested against each argument', async () => {
    const p = policy({ executables: { allow: ['git', 'ls'] }, argumentRules: { git: { deny: ['^--force$', '^push$'] } } });
    const d = await run(p, 'git', 'push', 'origin');
    expect(d).toMatchObject({ allowed: false, stage: 'arguments' });
    expect(d.reason).toBe('Argument "push" is not allowed for git: it matches the policy\'s deny rule /^push$/');
    expect((await run(p, 'git', 'pull')).allowed).toBe(true);
    expect((await run(p, 'ls', 'push')).allowed).toBe(true);
  });
  it('a rule keyed by absolute path applies to that path; a basename rule applies to any path', async () => {
    const p = policy({ executables: { allow: ['/usr/bin/git', 'git'] }, argumentRules: { git: { deny: ['^push$'] } } });
    expect((await run(p, '/usr/bin/git', 'push')).allowed).toBe(false);
    const q = policy({ executables: { allow: ['/usr/bin/git', 'git'] }, argumentRules: { '/usr/bin/git': { deny: ['^push$'] } } });
    expect((await run(q, '/usr/bin/git', 'push')).allowed).toBe(false);
  });
  it('an invalid stored regex fails closed', async () => {
    const p = policy({ executables: { allow: ['git'] }, argumentRules: { git: { deny: ['('] } } });
    const d = await run(p, 'git', 'status');
    expect(d.allowed).toBe(false);
    expect(d.reason).toContain('not a valid regular expression');
  });
  it('an executable named like an Object property finds no rule', async () => {
    const p = policy({ executables: { allow: ['__proto__', 'constructor'] } });
    expect((await run(p, '__proto__', 'x')).allowed).toBe(true);
    expect((await run(p, 'constructor', 'x')).allowed).toBe(true);
  });
  it('denies NUL bytes in arguments', async () => {
    expect((await run(P, 'ls', 'a\u0000b')).stage).toBe('arguments');
  });
});

describe('code mode', () => {
  const p = policy({ runtime: { enabled: true, allowedRuntimes: ['python', 'node'] }, executables: { allow: ['python3', 'node'] } });
  it('allows code for an allowed runtime and screens its args', async () => {
    expect((await check(p, { tool: 'runtime_execute', mode: 'code', runtime: 'python', command: 'python3', code: 'print(1)' })).allowed).toBe(true);
    expect((await check(p, { tool: 'runtime_execute', mode: 'argv', runtime: 'node', command: 'node', args: ['-e', '1'] })).stage).toBe('arguments');
  });
  it('denies code mode without code', async () => {
    expect((await check(p, { tool: 'runtime_execute', mode: 'code', runtime: 'python', command: 'python3' })).allowed).toBe(false);
  });
});

describe('script parsers', () => {
  it.each([
    'p',
    's/a/b/g',
    '1d;$d',
    '/x/,/y/p',
    'y/ab/cd/',
    '$!N',
    'a foo; e bar',
    'r /etc/hosts',
    '#comment\np',
    '1~2p',
    '0,/x/d',
    'v 4.2',
    'q5',
    'l 40',
    '{p;p}',
    's/a/b/w /dev/stderr',
  ])('sed %j passes', (s) => expect(sedScriptProblem(s)).toBeNull());
  it.each(['e', '1e', 's/a/b/e', 's/a/b/3e', 'w x', '1W x', 's/a/b/w x', '{e id\n}', ':x e id', 'k'])('sed %j is refused', (s) =>
    expect(sedScriptProblem(s)).not.toBeNull(),
  );
  it.each(['{ print }', '/a|b/', '$1 ~ /x|y/ { print }', '{ a = "|" }', 'NR>1 && NR<5', '{ print $1 / $2 }', 'BEGIN { while ((getline line < "f") > 0) n++ }'])(
    'awk %j passes',
    (s) => expect(awkProgramProblem(s)).toBeNull(),
  );
  it.each([
    'BEGIN{system("id")}',
    '{ print | "sh" }',
    '{ "date" | getline d }',
    '{ print |& "sh" }',
    '@load "x"',
    '@include "x"',
    '{ x = 1 / 2 | "sh" }',
    'BEGIN { system ("id") }',
  ])('awk %j is refused', (s) => expect(awkProgramProblem(s)).not.toBeNull());
});
