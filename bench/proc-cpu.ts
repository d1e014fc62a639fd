/**
 * CPU time of process trees from /proc (Linux): what each component of a job costs in CPU, a figure
 * that other processes' load does not change the way it changes wall time.
 *
 * A tree's CPU is the sum over its live processes of utime + stime + cutime + cstime: a process that
 * ends is reaped by its parent, whose cutime/cstime then carry its whole CPU, so the difference of two
 * snapshots counts every process that lived in between, including those that started and ended there.
 * (A process reparented out of the tree before it ends is lost; the agent's sandboxes and jobs are not:
 * `runsc run` is attached, its gofer and sandbox are its children.)
 */
import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks per second of /proc's utime/stime fields (USER_HZ, 100 on every Linux build we run on). */
const TICK_MS = 10;

export interface ProcStat {
  pid: number;
  ppid: number;
  comm: string;
  /** utime + stime, ms. */
  own: number;
  /** cutime + cstime (ended, reaped children), ms. */
  reaped: number;
}

/** Every process on the machine, read once. */
export function procSnapshot(): Map<number, ProcStat> {
  const out = new Map<number, ProcStat>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const s = procStat(Number(name));
    if (s) out.set(s.pid, s);
  }
  return out;
}

function procStat(pid: number): ProcStat | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null; // ended between the listing and the read
  }
  const close = stat.lastIndexOf(')');
  const comm = stat.slice(stat.indexOf('(') + 1, close);
  // Fields from 3 (state) on; utime, stime, cutime, cstime are fields 14–17 of proc(5).
  const f = stat.slice(close + 2).split(' ');
  return {
    pid,
    ppid: Number(f[1]),
    comm,
    own: (Number(f[11]) + Number(f[12])) * TICK_MS,
    reaped: (Number(f[13]) + Number(f[14])) * TICK_MS,
  };
}

/** `root` and every live descendant of it. */
export function descendants(snap: Map<number, ProcStat>, root: number): ProcStat[] {
  const kids = new Map<number, ProcStat[]>();
  for (const p of snap.values()) {
    const list = kids.get(p.ppid);
    if (list) list.push(p);
    else kids.set(p.ppid, [p]);
  }
  const out: ProcStat[] = [];
  const first = snap.get(root);
  if (!first) return out;
  const todo = [first];
  while (todo.length) {
    const p = todo.pop()!;
    out.push(p);
    todo.push(...(kids.get(p.pid) ?? []));
  }
  return out;
}

/** The first line of a process's command line, NUL-separated arguments joined with spaces ('' once it ended). */
export function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '';
  }
}
