/** The processes under a pid, read from /proc (Linux): what a clean stop must leave none of. */
import { readdirSync, readFileSync } from 'node:fs';

/** Parent pid of each live process. */
function parents(): Map<number, number> {
  const out = new Map<number, number>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      // Fields after the command (which may hold spaces and parentheses): state, ppid, …
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      out.set(Number(d), ppid);
    } catch {
      /* exited meanwhile */
    }
  }
  return out;
}

/** Every descendant of `pid` alive now (children, their children, …), whatever process group or session they are in. */
export function descendants(pid: number): number[] {
  const p = parents();
  const found: number[] = [];
  const walk = (of: number) => {
    for (const [child, parent] of p) if (parent === of && !found.includes(child)) (found.push(child), walk(child));
  };
  walk(pid);
  return found;
}

/** Whether a process is alive (a zombie counts as gone: it has stopped, only its exit status is left to read). */
export function alive(pid: number): boolean {
  try {
    return !/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}
