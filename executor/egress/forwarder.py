"""The egress forwarder: runs inside a job's sandbox, as the job's user, before the job starts.

`python3 -I -S -B forwarder.py PORT SOCKET` binds 127.0.0.1:PORT, then forks and the parent exits (so
the launcher goes on only once it listens); the child relays every accepted connection to the Unix
socket SOCKET, where the job's egress proxy listens on the host (executor/egress/sandbox-side.ts).
One thread-less select loop with bounded buffers: threads would count against the job's process limit.
"""
import os, socket, selectors, sys

R, W = selectors.EVENT_READ, selectors.EVENT_WRITE
# Bytes read from one side and not yet written to the other, past which that side is not read.
MAX_BUFFERED = 262144

port = int(sys.argv[1])
path = sys.argv[2]
ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(('127.0.0.1', port))
ls.listen(256)
if os.fork():
    os._exit(0)
ls.setblocking(False)
sel = selectors.DefaultSelector()
sel.register(ls, R, None)


class E:
    """One end of a relayed connection; `p` is its peer, `buf` what waits to be written to it."""

    def __init__(s, k):
        s.s = k
        s.buf = b''
        s.eof = False
        s.shut = False
        s.reg = False
        s.dead = False
        s.p = None


def upd(e):
    if e.dead:
        return
    m = (R if not e.eof and len(e.p.buf) < MAX_BUFFERED else 0) | (W if e.buf else 0)
    if m and e.reg:
        sel.modify(e.s, m, e)
    elif m:
        sel.register(e.s, m, e)
        e.reg = True
    elif e.reg:
        sel.unregister(e.s)
        e.reg = False


def close(e):
    for x in (e, e.p):
        if x.reg:
            sel.unregister(x.s)
        x.reg = False
        x.dead = True
        x.s.close()


while True:
    for k, ev in sel.select():
        e = k.data
        if e is None:
            try:
                c, _ = ls.accept()
            except OSError:
                continue
            u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                u.connect(path)
            except OSError:
                c.close()
                u.close()
                continue
            c.setblocking(False)
            u.setblocking(False)
            a = E(c)
            b = E(u)
            a.p = b
            b.p = a
            upd(a)
            upd(b)
            continue
        if e.dead:
            continue
        try:
            if ev & R:
                d = e.s.recv(65536)
                if d:
                    e.p.buf += d
                else:
                    e.eof = True
            if ev & W and e.buf:
                n = e.s.send(e.buf)
                e.buf = e.buf[n:]
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            close(e)
            continue
        for x in (e, e.p):
            if x.eof and not x.p.buf and not x.p.shut:
                x.p.shut = True
                try:
                    x.p.s.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
        if e.eof and e.p.eof and not e.buf and not e.p.buf:
            close(e)
            continue
        upd(e)
        upd(e.p)
