/**
 * What a sandbox needs to reach its job's egress proxy. The sandbox has no route out (gVisor
 * `--network=none`, bubblewrap's own network namespace), only a loopback. The proxy listens on
 * a Unix socket in the job's directory, which every driver bind-mounts into the sandbox (gVisor
 * connects to it with `--host-uds=open`); a tiny forwarder the launcher starts inside listens on
 * 127.0.0.1:EGRESS_PORT_INSIDE and relays each connection to that socket. The job's proxy
 * variables point there. A program that ignores them finds no route and no DNS: nothing.
 */
import { existsSync } from 'node:fs';

/** The socket's name in the job dir (inside: `/job/<name>`). */
export const EGRESS_SOCKET_FILE = '.gatehouse-egress.sock';
/** The forwarder's port on the sandbox's loopback. */
const EGRESS_PORT_INSIDE = 3128;
/** The forwarder's interpreter: -I -S -B, nothing from the environment or site dirs. */
const FORWARDER_PYTHON = '/usr/bin/python3';

/** Whether this host can run the forwarder inside a sandbox. */
export function forwarderAvailable(): boolean {
  return existsSync(FORWARDER_PYTHON);
}

/** The job's proxy variables (curl, npm, pip, git, go, cargo, and Node with NODE_USE_ENV_PROXY read some of these). */
export function proxyEnv(): Record<string, string> {
  const url = `http://127.0.0.1:${EGRESS_PORT_INSIDE}`;
  return {
    HTTP_PROXY: url,
    HTTPS_PROXY: url,
    http_proxy: url,
    https_proxy: url,
    ALL_PROXY: url,
    all_proxy: url,
    NO_PROXY: '',
    no_proxy: '',
    npm_config_proxy: url,
    npm_config_https_proxy: url,
    NODE_USE_ENV_PROXY: '1',
  };
}

/**
 * The forwarder: binds 127.0.0.1:PORT, then forks and the parent exits (so the launcher goes on
 * only once it listens); the child relays every accepted connection to the Unix socket, one
 * thread-less select loop with bounded buffers (threads would count against the job's process limit).
 */
const FORWARDER_PY = `import os,socket,selectors,sys
R,W=selectors.EVENT_READ,selectors.EVENT_WRITE
port=int(sys.argv[1]);path=sys.argv[2]
ls=socket.socket(socket.AF_INET,socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)
ls.bind(('127.0.0.1',port));ls.listen(256)
if os.fork():os._exit(0)
ls.setblocking(False)
sel=selectors.DefaultSelector()
sel.register(ls,R,None)
class E:
  def __init__(s,k):s.s=k;s.buf=b'';s.eof=False;s.shut=False;s.reg=False;s.dead=False;s.p=None
def upd(e):
  if e.dead:return
  m=(R if not e.eof and len(e.p.buf)<262144 else 0)|(W if e.buf else 0)
  if m and e.reg:sel.modify(e.s,m,e)
  elif m:sel.register(e.s,m,e);e.reg=True
  elif e.reg:sel.unregister(e.s);e.reg=False
def close(e):
  for x in (e,e.p):
    if x.reg:sel.unregister(x.s)
    x.reg=False;x.dead=True;x.s.close()
while True:
  for k,ev in sel.select():
    e=k.data
    if e is None:
      try:c,_=ls.accept()
      except OSError:continue
      u=socket.socket(socket.AF_UNIX,socket.SOCK_STREAM)
      try:u.connect(path)
      except OSError:
        c.close();u.close();continue
      c.setblocking(False);u.setblocking(False)
      a=E(c);b=E(u);a.p=b;b.p=a;upd(a);upd(b);continue
    if e.dead:continue
    try:
      if ev&R:
        d=e.s.recv(65536)
        if d:e.p.buf+=d
        else:e.eof=True
      if ev&W and e.buf:
        n=e.s.send(e.buf);e.buf=e.buf[n:]
    except (BlockingIOError,InterruptedError):pass
    except OSError:
      close(e);continue
    for x in (e,e.p):
      if x.eof and not x.p.buf and not x.p.shut:
        x.p.shut=True
        try:x.p.s.shutdown(socket.SHUT_WR)
        except OSError:pass
    if e.eof and e.p.eof and not e.buf and not e.p.buf:
      close(e);continue
    upd(e);upd(e.p)
`;

/** The forwarder's command line (argv) for a job whose dir is `jobDirInside`. */
export function forwarderArgv(jobDirInside: string): string[] {
  return [FORWARDER_PYTHON, '-I', '-S', '-B', '-c', FORWARDER_PY, String(EGRESS_PORT_INSIDE), `${jobDirInside}/${EGRESS_SOCKET_FILE}`];
}
