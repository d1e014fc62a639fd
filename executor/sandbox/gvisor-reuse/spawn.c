/*
 * The reuse init's job start, compiled by the agent when the host has a C compiler
 * (gvisor-reuse/spawner.ts) and loaded by init.py with ctypes; without it the init uses
 * os.posix_spawn, which does the same with more system calls.
 *
 * Why: every system call of a process in the sandbox is a round trip through gVisor's sentry
 * (~20 us of CPU under the ptrace platform). glibc's posix_spawn resets all 64 signal
 * dispositions in the child one by one and checks each file action's descriptor against the
 * descriptor limit: ~75 calls per job. This child makes ~17: it resets only the signals the
 * init itself changed (the caller lists them), and sets the job's rlimits and its user's ids
 * itself, so the init's own limits and ids never change (nothing to put back after the start) and
 * nothing a job runs can ever signal it.
 *
 * The child shares the init's memory until its exec (vfork): it only makes system calls, and
 * every signal stays blocked until the handlers it could run are reset, as glibc does.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* Makes `from` the descriptor `to`, open across the exec. */
static int place_fd(int from, int to) {
  if (from == to) {
    int flags = fcntl(to, F_GETFD);
    return flags < 0 ? -1 : fcntl(to, F_SETFD, flags & ~FD_CLOEXEC);
  }
  return dup2(from, to) < 0 ? -1 : 0;
}

/*
 * Starts `path` with `argv` and exactly `envp`, as uid/gid (real, effective and saved), in a new
 * session, with fds[0..2] as its stdin, stdout and stderr, the rlimits `limits[i]` = `values[i]`
 * (soft = hard), no signal blocked, and the signals in `resets` back at their default. The
 * caller's cwd is the job's already. Returns the child's pid, or -errno when it could not start
 * (the exec's own error included; that child is reaped here).
 */
int gatehouse_spawn(const char *path, char *const argv[], char *const envp[], const int fds[3], unsigned uid, unsigned gid,
                    const int *limits, const unsigned long long *values, int nlimits, const int *resets, int nresets) {
  for (int i = 0; i < 3; i++)
    if (fds[i] < 0 || (fds[i] < 3 && fds[i] != i)) return -EINVAL; /* one dup2 would close another's source */
  sigset_t all, old;
  volatile int child_errno = 0;
  sigfillset(&all);
  if (sigprocmask(SIG_SETMASK, &all, &old) < 0) return -errno;
  pid_t pid = vfork();
  if (pid == 0) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int i = 0; i < nresets; i++)
      if (sigaction(resets[i], &dfl, NULL) < 0) goto fail;
    if (setsid() < 0) goto fail;
    for (int i = 0; i < 3; i++)
      if (place_fd(fds[i], i) < 0) goto fail;
    /* Set on the job's own process: gVisor arms the CPU-time limit only for a process it is set on. */
    for (int i = 0; i < nlimits; i++) {
      struct rlimit rl = {(rlim_t)values[i], (rlim_t)values[i]};
      if (setrlimit(limits[i], &rl) < 0) goto fail;
    }
    /* Raw calls: glibc's wrappers would try to apply the change to every thread of the process. */
    if (syscall(SYS_setresgid, gid, gid, gid) < 0) goto fail;
    if (syscall(SYS_setresuid, uid, uid, uid) < 0) goto fail;
    sigset_t none;
    sigemptyset(&none);
    if (sigprocmask(SIG_SETMASK, &none, NULL) < 0) goto fail;
    execve(path, argv, envp);
  fail:
    child_errno = errno ? errno : EINVAL;
    _exit(127);
  }
  int vfork_errno = errno;
  sigprocmask(SIG_SETMASK, &old, NULL);
  if (pid < 0) return -vfork_errno;
  if (child_errno) {
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return -child_errno;
  }
  return pid;
}
