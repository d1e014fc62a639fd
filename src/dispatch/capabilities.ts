/**
 * The team DO's capabilities, wired to each other: the one place that says who may call whom.
 * The DO (team-dispatcher.ts) builds them over its host; a unit test builds the same set over
 * node:sqlite and fake sockets (test/dispatch/dispatcher.test.ts).
 */
import type { TraceStep } from '../contracts/trace.ts';
import type { PlanResult } from '../platform/plan.ts';
import { AgentLink } from './agent-link.ts';
import { AgentMessages } from './agent-messages.ts';
import { ArtifactUploads } from './artifact-uploads.ts';
import { D1Mirror } from './d1-mirror.ts';
import { Egress } from './egress.ts';
import { Followers } from './followers.ts';
import type { DispatchHost, Wakes } from './host.ts';
import { JobStore } from './job-store.ts';
import { Jobs } from './jobs.ts';

/** The steps of a call the DO marks for the hot-path trace (bench only). */
export type DispatchStep = Extract<TraceStep, 'do.job_start_sent' | 'do.exit_received' | 'do.settled'>;

export interface Capabilities {
  store: JobStore;
  link: AgentLink;
  followers: Followers;
  uploads: ArtifactUploads;
  mirror: D1Mirror;
  jobs: Jobs;
  messages: AgentMessages;
  egress: Egress;
  /** Everything with timed work: the host's one alarm fires at the soonest of their wake-ups. */
  wakes: readonly Wakes[];
}

export function capabilities(host: DispatchHost, o: { plan: PlanResult; trace: (step: DispatchStep) => void }): Capabilities {
  const { trace } = o;
  const store = new JobStore(host);
  const followers = new Followers(store, () => trace('do.settled'));
  const link = new AgentLink(host, (agentId, now) => jobs.agentGone(agentId, now));
  const uploads = new ArtifactUploads(host, store, (jobId) => followers.settle(jobId));
  // An unknown plan refuses every job (configError); the rows of those refusals still reach D1, within what every plan allows.
  const mirror = new D1Mirror(host, store, o.plan.ok ? o.plan.plan : 'free');
  const jobs: Jobs = new Jobs(host, {
    store,
    link,
    followers,
    uploads,
    mirror,
    onStartSent: () => trace('do.job_start_sent'),
    configError: o.plan.ok ? null : { code: o.plan.code, message: o.plan.message },
  });
  const egress = new Egress(host, { store, link });
  const messages = new AgentMessages(host, { link, jobs, store, followers, uploads, egress, onExitReceived: () => trace('do.exit_received') });
  return { store, link, followers, uploads, mirror, jobs, messages, egress, wakes: [link, jobs, mirror, egress] };
}
