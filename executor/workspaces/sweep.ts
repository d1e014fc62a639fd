/**
 * The idle time-to-live of workspaces (policy `workspaces.idleHours`, docs/workspaces.md): every
 * minute the agent deletes the workspaces no job used for that long. A workspace's warm sandboxes
 * (the reuse pool keeps them per workspace) are stopped first: they hold its directory mounted.
 * The team's object forgets the same workspaces by the same rule (src/dispatch/workspaces.ts).
 */
import { join } from 'node:path';
import type { Logger } from '../log.ts';
import type { WorkspaceStore } from './store.ts';

/** How often idle workspaces are looked for (their time-to-live is hours; a minute late is nothing). */
const WORKSPACE_SWEEP_MS = 60_000;

export class WorkspaceSweeper {
  private readonly store: Pick<WorkspaceStore, 'dir' | 'idle' | 'removeIfIdle'>;
  private readonly dropSandboxes: (workspaceDir: string) => Promise<void>;
  private readonly log: Logger;
  private timer: ReturnType<typeof setInterval> | undefined;
  private running: Promise<string[]> | null = null;

  constructor(store: Pick<WorkspaceStore, 'dir' | 'idle' | 'removeIfIdle'>, dropSandboxes: (workspaceDir: string) => Promise<void>, log: Logger) {
    this.store = store;
    this.dropSandboxes = dropSandboxes;
    this.log = log;
  }

  /** One pass: the ids of the workspaces deleted. A pass still running is joined, never doubled. */
  sweep(): Promise<string[]> {
    this.running ??= this.pass().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async pass(): Promise<string[]> {
    const gone: string[] = [];
    for (const id of this.store.idle()) {
      await this.dropSandboxes(join(this.store.dir, id));
      if (await this.store.removeIfIdle(id)) gone.push(id);
    }
    if (gone.length) this.log.info(`workspaces idle past their time-to-live deleted: ${gone.join(', ')}`);
    return gone;
  }

  start(everyMs = WORKSPACE_SWEEP_MS): void {
    this.timer = setInterval(() => {
      this.sweep().catch((e: unknown) => this.log.warn(`workspace sweep failed: ${(e as Error).message}`));
    }, everyMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
