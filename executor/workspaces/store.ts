/**
 * The agent's per-task workspaces (docs/workspaces.md): one directory per id under the agent's
 * private state dir (never under the shared workspace root, so a job there cannot reach them),
 * created on first use — empty, copied from another workspace, or empty with a clone to run as the
 * job's first step — and deleted when idle past its time-to-live or on `workspace.delete`.
 * Preparing an id is serialized (one lock per id), so two jobs that create the same new workspace
 * at once get one directory, made once: the second waits until the first job's creation (its
 * clone included) is over.
 */
import { chownSync, cpSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { JobWorkspace, WorkspaceId } from '../../src/contracts/workspaces.ts';
import type { GatehouseErrorShape } from '../../src/contracts/errors.ts';
import { SANDBOX_GID, SANDBOX_UID } from '../sandbox/types.ts';

/** What a job gets: its workspace's host directory, and the clone to run first when this job creates it from git. */
export interface PreparedWorkspace {
  id: WorkspaceId;
  hostDir: string;
  /** Bytes it holds before the job (its quota minus this is what the job may write). */
  bytes: number;
  clone?: { url: string; ref?: string };
  /** Call once the job ended: releases the id's lock (a creating job holds it to its end). */
  release(ok: boolean): void;
}

interface Meta {
  createdAt: number;
  lastUsedAt: number;
  idleMs: number;
}

export type Prepared = { ok: true; value: PreparedWorkspace } | { ok: false; error: GatehouseErrorShape };

export class WorkspaceStore {
  readonly dir: string;
  private readonly locks = new Map<string, Promise<void>>();
  /** Jobs running per id: a workspace in use is never swept, and its deletion waits for them. */
  private readonly inUse = new Map<string, number>();
  private readonly doomed = new Set<string>();
  /**
   * Bytes per id as last measured: after its last job, or when it was made. A job's start takes this instead of
   * walking the tree again (only jobs change a workspace, and each job's end measures it), so a workspace with a
   * large checkout costs one walk per job, not two; a change made beside the jobs shows at the next job's end.
   */
  private readonly measured = new Map<string, number>();
  private readonly now: () => number;

  constructor(stateDir: string, now: () => number = Date.now) {
    this.dir = join(stateDir, 'workspaces');
    this.now = now;
    mkdirSync(this.dir, { recursive: true, mode: 0o711 });
  }

  private path(id: string): string {
    return join(this.dir, id);
  }

  private metaPath(id: string): string {
    return join(this.dir, `${id}.meta.json`);
  }

  /** Waits for the id's lock and takes it; the returned function gives it back. */
  private async lock(id: string): Promise<() => void> {
    for (;;) {
      const held = this.locks.get(id);
      if (!held) break;
      await held;
    }
    let free!: () => void;
    this.locks.set(id, new Promise<void>((r) => (free = r)));
    return () => {
      this.locks.delete(id);
      free();
    };
  }

  /** The job's workspace, made now if it is new. */
  async prepare(ws: JobWorkspace): Promise<Prepared> {
    const unlock = await this.lock(ws.id);
    const dir = this.path(ws.id);
    const fail = (message: string): Prepared => {
      unlock();
      return { ok: false, error: { code: 'workspace_error', message } };
    };
    try {
      let clone: PreparedWorkspace['clone'];
      const fresh = !existsSync(dir);
      if (fresh) {
        const from = ws.source && 'copyFrom' in ws.source ? ws.source.copyFrom : null;
        if (from) {
          if (from === ws.id) return fail(`workspace "${ws.id}" cannot be copied from itself`);
          if (!existsSync(this.path(from))) return fail(`workspace "${from}" to copy from does not exist on this agent (workspace_list shows the team's)`);
          const size = await dirBytes(this.path(from));
          if (size > ws.quotaBytes)
            return fail(`workspace "${from}" holds ${size} bytes, more than the quota of ${ws.quotaBytes} (workspaces.quotaBytes): it cannot be copied`);
          // Copied beside, then renamed: a half copy is never a workspace. Symlinks stay links (never followed out).
          const tmp = `${dir}.copying`;
          rmSync(tmp, { recursive: true, force: true });
          cpSync(this.path(from), tmp, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true, dereference: false });
          renameSync(tmp, dir);
        } else {
          mkdirSync(dir, { mode: 0o755 });
          if (process.getuid?.() === 0) chownSync(dir, SANDBOX_UID, SANDBOX_GID);
          if (ws.source && 'git' in ws.source) clone = { url: ws.source.git, ...(ws.source.ref ? { ref: ws.source.ref } : {}) };
        }
        this.writeMeta(ws.id, { createdAt: this.now(), lastUsedAt: this.now(), idleMs: ws.idleMs });
      } else {
        const m = this.readMeta(ws.id);
        this.writeMeta(ws.id, { createdAt: m?.createdAt ?? this.now(), lastUsedAt: this.now(), idleMs: ws.idleMs });
      }
      this.inUse.set(ws.id, (this.inUse.get(ws.id) ?? 0) + 1);
      // A job that creates the workspace holds the lock to its end (its clone is part of the creation); others give it back now.
      if (!fresh) unlock();
      let released = false;
      return {
        ok: true,
        value: {
          id: ws.id,
          hostDir: dir,
          bytes: (fresh ? undefined : this.measured.get(ws.id)) ?? (await this.bytes(ws.id)),
          ...(clone ? { clone } : {}),
          release: (ok: boolean) => {
            if (released) return;
            released = true;
            // A creation that failed (a clone that did not finish) leaves nothing: the next job tries again.
            if (fresh && !ok) this.removeNow(ws.id);
            this.touch(ws.id);
            const n = (this.inUse.get(ws.id) ?? 1) - 1;
            if (n) this.inUse.set(ws.id, n);
            else this.inUse.delete(ws.id);
            if (!n && this.doomed.delete(ws.id)) this.removeNow(ws.id);
            if (fresh) unlock();
          },
        },
      };
    } catch (e) {
      return fail(`workspace "${ws.id}" could not be made: ${(e as Error).message}`);
    }
  }

  /** Bytes the workspace holds now (files and directories, symlinks as links), walked and kept for the next job's start. */
  async bytes(id: WorkspaceId): Promise<number> {
    const b = existsSync(this.path(id)) ? await dirBytes(this.path(id)) : 0;
    this.measured.set(id, b);
    return b;
  }

  /** Deletes a workspace now, or once the jobs running in it end. */
  delete(id: WorkspaceId): { ok: boolean; message?: string } {
    if (!existsSync(this.path(id))) return { ok: true, message: `workspace "${id}" was not on this agent` };
    if (this.inUse.get(id)) {
      this.doomed.add(id);
      return { ok: true, message: `workspace "${id}" is deleted once its running jobs end` };
    }
    this.removeNow(id);
    return { ok: true };
  }

  /** Workspaces no job used for their time-to-live and none is using or creating now. */
  idle(): string[] {
    const ids: string[] = [];
    for (const name of readdirSync(this.dir)) {
      if (!name.endsWith('.meta.json')) continue;
      const id = name.slice(0, -'.meta.json'.length);
      if (this.isIdle(id)) ids.push(id);
    }
    return ids;
  }

  private isIdle(id: string): boolean {
    const m = this.readMeta(id);
    return !!m && !this.inUse.get(id) && !this.locks.has(id) && this.now() - m.lastUsedAt >= m.idleMs;
  }

  /** Deletes `id` if it is still idle (a job may have started in it meanwhile); whether it did. */
  async removeIfIdle(id: string): Promise<boolean> {
    if (!this.isIdle(id)) return false;
    this.measured.delete(id);
    rmSync(this.metaPath(id), { force: true });
    await rm(this.path(id), { recursive: true, force: true });
    return true;
  }

  private removeNow(id: string): void {
    this.measured.delete(id);
    rmSync(this.metaPath(id), { force: true });
    rmSync(this.path(id), { recursive: true, force: true });
  }

  private touch(id: string): void {
    const m = this.readMeta(id);
    if (m && existsSync(this.path(id))) this.writeMeta(id, { ...m, lastUsedAt: this.now() });
  }

  private readMeta(id: string): Meta | null {
    try {
      return JSON.parse(readFileSync(this.metaPath(id), 'utf8')) as Meta;
    } catch {
      return null;
    }
  }

  private writeMeta(id: string, m: Meta): void {
    writeFileSync(this.metaPath(id), JSON.stringify(m), { mode: 0o600 });
  }
}

/** Entries a size walk reads between two turns of the event loop (~4 ms here): a large checkout never stalls the agent. */
const WALK_SLICE_ENTRIES = 1000;

/**
 * Bytes under `dir`: the sizes of its files, links and directories (lstat: a link is never followed). Synchronous reads
 * (an asynchronous stat per file costs several times the CPU), in slices that give the event loop its turn between them
 * (heartbeats, other jobs' output).
 */
async function dirBytes(dir: string): Promise<number> {
  let total = 0;
  let read = 0;
  const stack = [dir];
  while (stack.length) {
    const d = stack.pop()!;
    let names: string[];
    try {
      names = readdirSync(d);
    } catch {
      continue;
    }
    for (const n of names) {
      if (++read >= WALK_SLICE_ENTRIES) {
        read = 0;
        await new Promise((r) => setImmediate(r));
      }
      const p = join(d, n);
      try {
        const st = lstatSync(p);
        total += st.isDirectory() ? 0 : st.size;
        if (st.isDirectory()) stack.push(p);
      } catch {
        /* removed meanwhile */
      }
    }
  }
  return total;
}
