"""The trusted init (PID 1) of a reusable gVisor sandbox.

The driver copies this file into the sandbox's read-only root (executor/sandbox/gvisor-reuse/init.ts)
and starts it as `python3 -I -S -B /.gatehouse-init.py JOB_UID JOB_GID DEFAULT_PATH`. It runs as root
inside the sandbox with only the capabilities it needs (REUSE_INIT_CAPS in executor/sandbox/gvisor.ts);
a job runs as the job user with no capability at all (the init clears its bounding set and groups
once; the sandbox has no_new_privs), so it can neither trace the init nor write to its channel (the
init's own fds 0/1, host pipes), and a signal it sends the init finds it ignored (with the compiled
start below, it cannot send one: the init's ids are never the job user's).

Per job: one vfork + exec (no helper exec): a new session, the job's rlimits (soft = hard), cwd,
exactly its env, the job user's ids. The agent compiles that start (spawn.c, loaded with ctypes)
when its host has a C compiler and names it as a fourth argument; without it the init uses
os.posix_spawn. After the job's process ends: every other
process dies (kill -1 until none is left to reap), the output pipes drain to EOF, /tmp and /job are
emptied, and the init checks the sandbox is clean (no process but itself, no file in /tmp or /job,
no System V IPC object; POSIX message queues are refused by the sandbox's seccomp filter). Any
doubt is reported and the agent discards the sandbox.

Channel (frames of 1 type byte + 4-byte big-endian length + payload):
  agent -> init (fd 0): J job JSON, I stdin bytes, i stdin end (none for a job whose J says stdin false)
  init -> agent (fd 1): R ready, O/E stdout/stderr bytes, o/e stream end (written with X), B build status,
                        X exit JSON {code} | {signal}, C clean JSON {ok, why?}
"""
import ctypes, errno, json, os, resource, select, signal, struct, sys

CH_IN, CH_OUT = 0, 1
libc = ctypes.CDLL(None, use_errno=True)
# shm_info.used_ids, msginfo.msgpool, seminfo.semusz: how many objects exist (sys/ipc.h *_INFO commands).
SHM_INFO, MSG_INFO, SEM_INFO = 14, 12, 19
WIPE = ('/tmp', '/job')
CWD_ROOTS = ('/workspace', '/job')
# The job user's ids and the PATH of a job whose env has none (the agent always sets one): given on
# the command line by the agent, which defines them once (executor/sandbox/types.ts).
JOB_UID = JOB_GID = DEFAULT_PATH = None
# The compiled start (spawn.c) and the signals whose disposition the init changed, which its child
# puts back to their default; None: os.posix_spawn.
SPAWNER = RESETS = None
# With os.posix_spawn, every signal a job could send the init while it starts a job (see spawn)
# finds it ignored; with the compiled start no job can signal the init at all, and these stay
# blocked instead (a job inherits no ignored signal, so its start resets none). SIGCHLD only wakes
# the relay loop.
# (Faults stay as they are: the kernel delivers those to whoever caused them.)
QUIET = sorted(signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD, signal.SIGSEGV, signal.SIGBUS,
                                         signal.SIGFPE, signal.SIGILL, signal.SIGTRAP, signal.SIGSYS})
PR_CAPBSET_DROP = 24
RL = {'nofile': resource.RLIMIT_NOFILE, 'fsize': resource.RLIMIT_FSIZE, 'cpu': resource.RLIMIT_CPU,
      'core': resource.RLIMIT_CORE, 'nproc': resource.RLIMIT_NPROC}
# The init's own limits, read once: only the init sets them, and it puts them back after every
# spawn, so a job's start reads none of them again (every system call here is a round trip
# through the sentry).
OWN_LIMITS = {name: resource.getrlimit(r) for name, r in RL.items()}

def frame(t, data=b''):
    return t + struct.pack('>I', len(data)) + data

def send(msg):
    """Writes whole frames to the agent (one write for several: each system call is a round trip through the sentry)."""
    while msg:
        msg = msg[os.write(CH_OUT, msg):]

# The end frames of the job's output streams: sent with its exit frame, in one write.
ended_streams = bytearray()

inbuf = bytearray()
def read_frame(block=True):
    """One frame from the agent, or None when none is complete (non-blocking) / the channel closed."""
    global inbuf
    while True:
        if len(inbuf) >= 5:
            n = struct.unpack('>I', bytes(inbuf[1:5]))[0]
            if len(inbuf) >= 5 + n:
                t, data = bytes(inbuf[0:1]), bytes(inbuf[5:5 + n])
                del inbuf[:5 + n]
                return t, data
        if not block:
            return None
        chunk = os.read(CH_IN, 65536)
        if not chunk:
            sys.exit(0)  # the agent is gone: the sandbox ends with us
        inbuf += chunk

def candidates(name, env):
    """Where execvp would look for name, in its order: the job's own PATH (not ours)."""
    if '/' in name:
        return [name]
    return [os.path.join(d or '.', name) for d in env.get('PATH', DEFAULT_PATH).split(':')]

def load_spawner(path):
    f = ctypes.CDLL(path).gatehouse_spawn
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_int),
                  ctypes.c_uint, ctypes.c_uint, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_int,
                  ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    return f

def c_strings(items):
    """A NULL-terminated char* array, refusing what os.posix_spawn refuses (C would cut at the NUL)."""
    arr = (ctypes.c_char_p * (len(items) + 1))()
    for i, item in enumerate(items):
        b = os.fsencode(item)
        if b'\0' in b:
            raise ValueError('embedded null byte')
        arr[i] = b
    return arr

def compiled_spawn(path, argv, env, fds, rlimits):
    """The compiled start (spawn.c): the job's rlimits and its user's ids are set in the child; ours never change."""
    for k in env:
        if not k or '=' in k:
            raise ValueError('illegal environment variable name')
    names = list(rlimits)
    r = SPAWNER(os.fsencode(path), c_strings(argv), c_strings(['%s=%s' % kv for kv in env.items()]), (ctypes.c_int * 3)(*fds),
                JOB_UID, JOB_GID, (ctypes.c_int * len(names))(*[RL[n] for n in names]),
                (ctypes.c_ulonglong * len(names))(*[rlimits[n] & 0xffffffffffffffff for n in names]), len(names),
                (ctypes.c_int * len(RESETS))(*RESETS), len(RESETS))
    if r < 0:
        raise OSError(-r, os.strerror(-r))
    return r

def spawn(job, argv, fd0, fd1, fd2):
    """Starts argv as the job user: returns its pid, or a wait status when it could not start.

    One vfork and one exec, nothing else in the job's path: under gVisor's ptrace platform a fork
    of this interpreter costs ~50 ms and every exec several ms of CPU. The compiled start
    (spawn.c) sets the job's rlimits and all three of its user's ids in the child; ours never
    change. With os.posix_spawn the ids come from POSIX_SPAWN_RESETIDS: for the moment of the
    spawn our real ids are the job user's (effective ids stay root), the child sets its effective
    ids to them, and the exec makes the saved ids the same; the rlimits are ours for that moment
    too (CAP_SYS_RESOURCE puts ours back). Either way the job holds no root id and, as a non-root
    exec with no_new_privs, no capability (our bounding set is empty besides, see
    drop_privilege_for_jobs). The cwd is ours either way, checked after the chdir, so a symlink
    swapped in cannot lead out of the workspace. With os.posix_spawn, while our real ids are the
    job user's, a process the same job's build step left behind may signal us: every signal it
    can send is ignored (QUIET), and SIGKILL/SIGSTOP would end or stall this sandbox, which then
    serves no other job (the agent discards it).
    """
    saved = []
    try:
        if not SPAWNER:
            for name, v in job['rlimits'].items():
                saved.append((RL[name], OWN_LIMITS[name]))
                resource.setrlimit(RL[name], (v, v))
        os.chdir(job['cwd'])
        cwd = os.getcwd()
        if not any(cwd == d or cwd.startswith(d + '/') for d in CWD_ROOTS):
            raise OSError(errno.EACCES, 'the working directory left the workspace')
        env = job['env']
        actions = [(os.POSIX_SPAWN_DUP2, fd0, 0), (os.POSIX_SPAWN_DUP2, fd1, 1), (os.POSIX_SPAWN_DUP2, fd2, 2)]
        err = None
        if not SPAWNER:
            os.setresgid(JOB_GID, -1, -1)
            os.setresuid(JOB_UID, -1, -1)
        try:
            for path in candidates(argv[0], env):
                try:
                    if SPAWNER:
                        pid = compiled_spawn(path, argv, env, (fd0, fd1, fd2), job['rlimits'])
                    else:
                        pid = os.posix_spawn(path, argv, env, file_actions=actions, setsid=True, resetids=True,
                                             setsigdef=QUIET, setsigmask=())
                    break
                except OSError as e:
                    # execvp goes on past a missing or unreadable candidate and reports EACCES if any was one.
                    if e.errno not in (errno.ENOENT, errno.ENOTDIR, errno.EACCES) or '/' in argv[0]:
                        raise
                    if err is None or e.errno == errno.EACCES:
                        err = e
            else:
                raise err
        finally:
            if not SPAWNER:
                os.setresuid(0, -1, -1)
                os.setresgid(0, -1, -1)
        # gVisor arms the CPU-time limit only when it is set on a process (an inherited one never
        # fired: a spinning job ran to its timeout), so it is set again on the job's process, from
        # here: no exec of prlimit in the job's path. The child is ours and not yet reaped, so the
        # pid is still the job's; CPU it used before this counts all the same.
        cpu = job['rlimits'].get('cpu')
        if cpu is not None and not SPAWNER:  # the compiled start set it on the job's process itself
            try:
                resource.prlimit(pid, resource.RLIMIT_CPU, (cpu, cpu))
            except ProcessLookupError:
                pass  # already gone
        return pid
    except OSError as e:
        os.write(fd2, ('%s: %s\n' % (argv[0], e.strerror)).encode())
        return -(127 if e.errno == errno.ENOENT else 126)
    except Exception as e:  # e.g. a string the system cannot encode: the job does not start, the init lives on
        os.write(fd2, ('%s: cannot start: %s\n' % (argv[0], e)).encode('utf-8', 'replace'))
        return -126
    finally:
        os.chdir('/')
        for r, lim in saved:
            resource.setrlimit(r, lim)

def drop_privilege_for_jobs():
    """Once, before any job: no supplementary group and an empty capability bounding set.

    Jobs inherit both. The init keeps its own capabilities (the bounding set only limits what an
    exec could gain, and the init execs nothing itself).
    """
    os.setgroups([])
    # posix_spawn closes nothing: whatever the sandbox handed us besides stdio (a host fd) must not reach a job.
    for fd in map(int, os.listdir('/proc/self/fd')):
        if fd > 2:
            try:
                os.set_inheritable(fd, False)
            except OSError:
                pass  # the listing's own fd, closed by now
    cap = 0
    while libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1
    if ctypes.get_errno() != errno.EINVAL:  # EINVAL: past the last capability there is
        raise OSError(ctypes.get_errno(), 'could not clear the capability bounding set')

def status_of(st):
    if os.WIFSIGNALED(st):
        return {'signal': os.WTERMSIG(st)}
    return {'code': os.WEXITSTATUS(st)}

def kill_all():
    """Kills every process but ours and reaps them; True once none is left (we are PID 1: all are our descendants)."""
    for _ in range(200):
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        try:
            while True:
                pid, _st = os.waitpid(-1, 0)
        except ChildProcessError:
            return True
        except InterruptedError:
            continue
    return False

def wipe(path):
    for name in os.listdir(path):
        p = os.path.join(path, name)
        if os.path.isdir(p) and not os.path.islink(p):
            os.chmod(p, 0o700)
            wipe(p)
            os.rmdir(p)
        else:
            os.unlink(p)

def check_clean(job):
    # With posix_spawn the job's rlimits are ours for the moment of each start: never let our own CPU time near them.
    if not SPAWNER:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        if (ru.ru_utime + ru.ru_stime) * 2 > job['rlimits'].get('cpu', 1 << 30):
            return 'the init used over half the job CPU limit'
    others = [p for p in os.listdir('/proc') if p.isdigit() and p != '1']
    if others:
        return 'processes left: ' + ' '.join(others[:10])
    # /tmp and /job are not listed again: wipe() emptied them after every process had died, and
    # an entry it could not remove raised (nothing is left that could write one since).
    # gVisor's /proc/sysvipc is empty whatever exists (ipcs shows nothing): ask the kernel.
    info = ctypes.create_string_buffer(256)
    words = ctypes.cast(info, ctypes.POINTER(ctypes.c_int))
    if libc.shmctl(0, SHM_INFO, info) < 0 or words[0]:
        return 'System V shared memory left'
    if libc.msgctl(0, MSG_INFO, info) < 0 or words[0]:
        return 'System V message queues left'
    if libc.semctl(0, 0, SEM_INFO, info) < 0 or words[7]:
        return 'System V semaphores left'
    return None

def st_code(st):
    return os.WEXITSTATUS(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st)

stdin_state = {'eof': False, 'closed': False}
def take_stdin_frames(into):
    """Moves every complete stdin frame already received into the buffer; the end frame marks stdin EOF."""
    while True:
        f = read_frame(False)
        if f is None:
            return
        if f[0] == b'I':
            into += f[1]
        elif f[0] == b'i':
            stdin_state['eof'] = True


def wait_relay(pid, readers, in_w, stdin_buf):
    """Relays output and stdin until the process pid has exited; returns its wait status."""
    global inbuf
    if pid < 0:
        return (-pid) << 8
    while True:
        try:
            got, st = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return 0
        if got:
            return st
        rl = [wake_r, CH_IN] + list(readers)
        wl = [in_w] if (in_w is not None and stdin_buf and not stdin_state['closed']) else []
        r, w, _ = select.select(rl, wl, [], 0.5)
        for fd in r:
            if fd == wake_r:
                try:
                    os.read(wake_r, 512)
                except BlockingIOError:
                    pass
            elif fd == CH_IN:
                chunk = os.read(CH_IN, 65536)
                if not chunk:
                    sys.exit(0)
                inbuf += chunk
                take_stdin_frames(stdin_buf)
            else:
                relay(fd, readers)
        if in_w is not None and not stdin_state['closed']:
            if w and stdin_buf:
                try:
                    n = os.write(in_w, bytes(stdin_buf[:65536]))
                    del stdin_buf[:n]
                except BlockingIOError:
                    pass
                except BrokenPipeError:
                    stdin_buf.clear()
            if not stdin_buf and stdin_state['eof']:
                os.close(in_w)
                stdin_state['closed'] = True

def relay(fd, readers):
    data = os.read(fd, 65536)
    t, end = readers[fd]
    if data:
        send(frame(t, data))
    else:
        ended_streams.extend(frame(end))
        del readers[fd]
        os.close(fd)

def finish(st, readers, in_w):
    if not kill_all():
        os._exit(1)  # a process that will not die: end the sandbox (the agent sees it gone)
    clean = True
    # Every writer is dead now: the pipes reach EOF.
    while readers:
        for fd in list(readers):
            relay(fd, readers)
    if not stdin_state['closed']:
        os.close(in_w)
        stdin_state['closed'] = True
    send(bytes(ended_streams) + frame(b'X', json.dumps(status_of(st)).encode()))
    ended_streams.clear()
    return clean

def main():
    global wake_r, inbuf, RESETS
    os.umask(0o022)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    if SPAWNER:
        signal.pthread_sigmask(signal.SIG_BLOCK, QUIET)
        # Python's own (SIGINT, SIGPIPE, SIGXFSZ) and ours: a job starts with none of them.
        RESETS = [s for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP) and signal.getsignal(s) != signal.SIG_DFL]
    else:
        for sig in QUIET:
            try:
                signal.signal(sig, signal.SIG_IGN)
            except (OSError, ValueError):
                pass  # not settable in this sandbox
    drop_privilege_for_jobs()
    send(frame(b'R'))
    while True:
        t, data = read_frame()
        if t != b'J':
            continue
        job = json.loads(data)
        stdin_state.update(eof=False, closed=False)
        # Stdin frames that arrived with the job frame.
        pre = bytearray()
        take_stdin_frames(pre)
        ok = run_job(job, pre)
        why = None if ok else 'a process did not die'
        if why is None:
            try:
                for d in WIPE:
                    wipe(d)
                why = check_clean(job)
            except OSError as e:
                why = 'cleaning failed: %s' % e
        send(frame(b'C', json.dumps({'ok': why is None, 'why': why}).encode()))

def run_job(job, buf):
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    in_r, in_w = os.pipe()
    if job.get('stdin', True):
        os.set_blocking(in_w, False)
    else:
        # A job given no stdin reads EOF at once (a pipe, as in every sandbox); no end frame will come.
        os.close(in_w)
        in_w = None
        stdin_state.update(eof=True, closed=True)
    readers = {out_r: (b'O', b'o'), err_r: (b'E', b'e')}
    if job.get('build'):
        null = os.open('/dev/null', os.O_RDONLY)
        pid = spawn(job, job['build'], null, out_w, err_w)
        os.close(null)
        st = wait_relay(pid, readers, None, buf)
        send(frame(b'B', str(st_code(st)).encode()))
        if not (os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0):
            os.close(in_r); os.close(out_w); os.close(err_w)
            return finish(st, readers, in_w)
    pid = spawn(job, job['run'], in_r, out_w, err_w)
    os.close(in_r); os.close(out_w); os.close(err_w)
    st = wait_relay(pid, readers, in_w, buf)
    return finish(st, readers, in_w)

if __name__ == '__main__':
    JOB_UID, JOB_GID, DEFAULT_PATH = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    if len(sys.argv) > 4:
        SPAWNER = load_spawner(sys.argv[4])  # named by the agent: never a silent fallback
    main()
