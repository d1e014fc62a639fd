/**
 * How the pages show values: text from users through one helper (userText), commands, a job's outcome, times,
 * durations and sizes.
 */
import { visible } from '../../contracts/visible-text.ts';
import type { CommandValue, JobCall, JobView } from './answers.ts';
import { h } from './dom.ts';

/**
 * visible(text, asWord, keepLines): text from users with every control, bidirectional and invisible
 * character written as an escape (\x1b, \u202e, \n); asWord quotes it as one argument when it is not
 * a plain word; keepLines leaves line breaks and tabs. The CLI shows text with the same function.
 */
export { visible };

/**
 * Text a user, a client or an agent chose (a command's argument, a subject, a reason, a cwd, an
 * agent's id or version) as an element of its own: <bdi> isolates its direction from the text
 * around it, and visible() shows what would otherwise act on the page instead of being read. Every
 * page shows such text through this one helper.
 */
export function userText(v: unknown, asWord?: boolean, cls?: string): HTMLElement | '' {
  if (v === undefined || v === null) return '';
  return h('bdi', cls ? { class: cls } : null, visible(typeof v === 'string' ? v : JSON.stringify(v), asWord));
}

/**
 * A stored command as one line a person can read and paste: argv elements shell-quoted where they
 * are not plain words, a shell string as written, every control or bidirectional character shown
 * as an escape (visible). Accepts an argv array, the audit log's { mode, command, args, runtime }
 * and a command the store kept only the start of ({ truncated, head }).
 */
function commandText(c: CommandValue): string {
  if (c === null || c === undefined) return '';
  const word = (x: unknown) => visible(typeof x === 'string' ? x : JSON.stringify(x), true);
  if (typeof c === 'string') return visible(c);
  if (Array.isArray(c)) return c.map(word).join(' ');
  if (typeof c === 'object' && c.truncated && typeof c.head === 'string') return visible(c.head) + '… (' + c.chars + ' characters stored in part)';
  if (typeof c === 'object' && typeof c.command === 'string') {
    const prefix = c.runtime ? '[' + visible(String(c.runtime)) + '] ' : '';
    if (c.mode === 'shell') return prefix + visible(c.command);
    const argv: unknown[] = [c.command];
    return (
      prefix +
      argv
        .concat(Array.isArray(c.args) ? c.args : [])
        .map(word)
        .join(' ')
    );
  }
  return visible(JSON.stringify(c));
}

/** Which long commands a live list shows opened: kept across its refreshes, under each command's key. */
export interface OpenedCommands {
  key: string;
  open: Set<string>;
}

/**
 * A command for a table cell or a fact: up to max characters in one code element, the whole text
 * on hover (title) and, when it is longer, in a disclosure that opens with a click or Enter.
 */
export function commandView(c: CommandValue, max?: number, keep?: OpenedCommands): HTMLElement {
  const full = commandText(c);
  if (!full) return h('span', { class: 'sub' }, '…');
  const limit = max || 120;
  if (full.length <= limit) return h('code', { class: 'cmd', title: full }, h('bdi', null, full));
  // A live list re-renders every few seconds; an opened command stays open, and keeps focus.
  const d = h(
    'details',
    { class: 'cmd', open: !!keep?.open.has(keep.key) },
    h(
      'summary',
      { title: full, id: keep ? 'cmd-' + keep.key : null, tabindex: keep ? '0' : null },
      h('code', null, h('bdi', null, full.slice(0, limit) + '…')),
    ),
    h('code', { class: 'cmd full' }, h('bdi', null, full)),
  );
  if (keep) {
    d.addEventListener('toggle', () => {
      if (d.open) keep.open.add(keep.key);
      else keep.open.delete(keep.key);
    });
  }
  return d;
}

/** What a job's colour is decided from. */
export interface JobEnd {
  state: string;
  exit_code?: number | null;
}

const BAD_STATES = ['signaled', 'timed_out', 'lost', 'failed_to_start', 'refused'];
/**
 * How a job ended, for its colour: ok (exit 0), bad (a non-zero exit, a signal, a timeout, never
 * ran), open (queued, running) or neutral (cancelled by someone).
 */
export function jobOutcome(j: JobEnd): 'ok' | 'bad' | 'open' | 'neutral' {
  const code = j.exit_code ?? undefined;
  if (j.state === 'exited') return code === 0 ? 'ok' : 'bad';
  if (BAD_STATES.includes(j.state)) return 'bad';
  if (j.state === 'queued' || j.state === 'running') return 'open';
  return 'neutral';
}

/** The job's state as a badge coloured by its outcome (exited with 128 is a failure, not a green badge). */
export function jobBadge(j: JobEnd): HTMLSpanElement {
  const code = j.exit_code ?? undefined;
  const text = j.state === 'exited' && code !== 0 && code !== undefined ? 'exited ' + code : j.state;
  return h('span', { class: 'badge ' + j.state + ' ' + jobOutcome(j), 'data-state': j.state, 'data-outcome': jobOutcome(j) }, text);
}

function exitText(j: Pick<JobView, 'exit_code' | 'signal'>): string {
  if (j.exit_code !== null && j.exit_code !== undefined) return String(j.exit_code);
  return j.signal ? j.signal : '';
}

/** A job's exit: a failure reads as one (colour and the word), a clean exit stays plain. */
export function exitView(j: Pick<JobView, 'state' | 'exit_code' | 'signal' | 'timed_out'>): HTMLElement | string {
  const t = exitText(j);
  if (!t) return j.timed_out ? h('span', { class: 'exit bad' }, 'timed out') : '';
  return jobOutcome(j) === 'bad' ? h('span', { class: 'exit bad', title: 'failed' }, t) : t;
}

/** Allowed by a rule, or approved by a person after an ask; the policy's reason shortened, whole on hover. */
export function policyView(call: JobCall | null, max?: number): HTMLElement {
  if (!call) return h('span', { class: 'sub' }, '…');
  const p: Partial<JobCall['policy']> = call.policy || {};
  const reason = p.reason ? visible(p.reason) : '';
  const limit = max || 80;
  return h(
    'span',
    { class: 'policy' },
    h('span', { class: 'badge ' + (p.decision || 'allowed') }, p.decision || 'allowed'),
    reason ? h('span', { class: 'sub reason', title: reason }, ' ', h('bdi', null, reason.length > limit ? reason.slice(0, limit) + '…' : reason)) : null,
  );
}

/**
 * A job's output as the page shows it: line breaks and tabs kept, every other control, bidirectional
 * or invisible character as its escape (an ESC sequence or a U+202E in a job's output is data, not
 * something that may reorder or hide what is around it).
 */
export function outputText(text: string): string {
  return visible(text, false, true);
}

/** A time the API gives (epoch ms, or a date string) in the viewer's locale. */
export function fmtTime(ms: number | string | null | undefined): string {
  if (ms === null || ms === undefined) return '';
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? String(ms) : d.toLocaleString();
}

export function fmtAgo(ms: number | null | undefined, now?: number): string {
  if (ms === null || ms === undefined) return 'never';
  const s = Math.max(0, Math.round(((now || Date.now()) - ms) / 1000));
  if (s < 60) return s + ' s ago';
  if (s < 3600) return Math.floor(s / 60) + ' min ago';
  if (s < 86400) return Math.floor(s / 3600) + ' h ago';
  return Math.floor(s / 86400) + ' d ago';
}

export function fmtDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '';
  if (ms < 1000) return ms + ' ms';
  if (ms < 60000) return (ms / 1000).toFixed(1) + ' s';
  return Math.floor(ms / 60000) + ' min ' + Math.round((ms % 60000) / 1000) + ' s';
}

export function fmtBytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return '';
  if (n < 1024) return n + ' B';
  if (n < 1048576) return (n / 1024).toFixed(1) + ' KiB';
  return (n / 1048576).toFixed(1) + ' MiB';
}
