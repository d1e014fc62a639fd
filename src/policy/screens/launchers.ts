/**
 * Executables that exist to run another program named in their arguments. Allowing one would
 * turn the executable allowlist into "anything": `env sh -c …`, `xargs sh`, `timeout 5 sh`.
 * They are refused even if a policy lists them.
 */
const LAUNCHERS = new Set([
  'env', 'xargs', 'nice', 'timeout', 'nohup', 'stdbuf', 'setsid', 'chroot', 'sudo', 'su', 'doas', 'pkexec', 'runuser',
  'ionice', 'taskset', 'chrt', 'nsenter', 'unshare', 'setpriv', 'capsh', 'flock', 'watch', 'script', 'strace', 'ltrace',
  'gdb', 'lldb', 'valgrind', 'busybox', 'toybox', 'parallel', 'time', 'command', 'exec', 'eval', 'builtin', 'sg', 'newgrp',
  'fakeroot', 'faketime', 'proot', 'bwrap', 'firejail', 'systemd-run', 'dbus-launch', 'dbus-run-session', 'xvfb-run', 'catchsegv',
  'start-stop-daemon', 'daemonize', 'expect', 'socat', 'ssh-agent', 'prlimit', 'cpulimit', 'torsocks', 'torify', 'proxychains',
  'proxychains4', 'chpst', 'setarch', 'linux32', 'linux64', 'numactl', 'cgexec', 'scl', 'run-parts', 'entr', 'at', 'batch',
  'crontab', 'dtach', 'tmux', 'screen', 'npx', 'bunx', 'pnpx', 'uvx', 'pipx', 'rlwrap', 'unbuffer', 'sshpass',
  'chronic', 'ifne', 'pee', 'vipe', 'zrun', 'nocache', 'eatmydata', 'aa-exec', 'sandbox',
]);

/** The dynamic loader runs any ELF file given to it, bypassing the allowlist by path. */
const LOADER = /^ld(?:-linux(?:-[\w-]+)?)?\.so(?:\.\d+)*$|^ld-musl-[\w-]+\.so(?:\.\d+)*$/;

export function launcherReason(base: string): string | null {
  if (LAUNCHERS.has(base) || LOADER.test(base)) {
    return `Executable "${base}" is not allowed: it runs another program named in its arguments, which would bypass the executable allowlist`;
  }
  return null;
}
