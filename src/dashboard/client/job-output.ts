/** A job's output on its page: the live tail while it runs, the stored streams after (with downloads), and search. */
import { ApiError, api, isMissingRoute } from './api.ts';
import type { AdminJob, ArtifactChunk, ArtifactInfo, LiveOutput, SearchAnswer } from './answers.ts';
import { type Child, field, h, type Messages, messages, saveBlob } from './dom.ts';
import { fmtBytes, outputText } from './format.ts';
import type { Conversation } from './conversation.ts';

const TAIL_BYTES = 65536;
const STREAMS = ['stdout', 'stderr'] as const;
type Stream = (typeof STREAMS)[number];

interface StreamView {
  el: HTMLElement;
  pre: HTMLPreElement;
  info: HTMLParagraphElement;
  dl: HTMLButtonElement;
  stream: Stream;
}
type Outputs = Record<Stream, StreamView>;
/** How many bytes of each stream the live tail has shown. */
export type Live = Record<Stream, number>;

export function streamView(stream: Stream): StreamView {
  const pre = h('pre', { class: 'output', tabindex: '0', 'aria-label': stream, 'data-stream': stream });
  const info = h('p', { class: 'sub' });
  const dl = h('button', { type: 'button', hidden: true }, 'Download ' + stream);
  const el = h('section', { class: 'stream', 'aria-label': stream }, h('h3', null, stream), info, pre, dl);
  return { el: el, pre: pre, info: info, dl: dl, stream: stream };
}

/** While the job runs: new bytes since the last poll, if the gateway offers live output. */
export async function liveTail(id: string, outputs: Outputs, live: Live, outMsg: Messages, conversation?: Conversation): Promise<void> {
  for (const s of STREAMS) {
    try {
      const r = await api<LiveOutput>('GET', '/jobs/' + encodeURIComponent(id) + '/output?stream=' + s + '&offset=' + live[s]);
      if (r.text) {
        outputs[s].pre.append(outputText(r.text));
        outputs[s].pre.scrollTop = outputs[s].pre.scrollHeight;
      }
      if (s === 'stdout') conversation?.update(r.text, r.inputs);
      live[s] = r.nextOffset;
      outputs[s].info.textContent = 'live · ' + fmtBytes(live[s]);
    } catch (e) {
      if (isMissingRoute(e)) {
        outMsg.say('Running… the output appears here when the job ends (this gateway has no live output).');
        return;
      }
      outMsg.fail(e);
      return;
    }
  }
}

/** After the job: the tail of each stored stream, and downloads. Returns true once shown. */
export async function finalOutput(handle: string | null, outputs: Outputs, outMsg: Messages, job: AdminJob): Promise<boolean> {
  if (!handle) {
    outMsg.say('This job stored no output.');
    return true;
  }
  // The upload can trail the exit: wait until the gateway says the artifact is complete (or failed).
  if (job.artifact_state === 'uploading') {
    outMsg.say('Storing the output…');
    return false;
  }
  if (job.artifact_state === 'none' || job.artifact_state === 'failed') {
    outMsg.say('No stored output (artifact ' + job.artifact_state + ').');
    return true;
  }
  let info: ArtifactInfo;
  try {
    info = await api<ArtifactInfo>('GET', '/artifacts/' + encodeURIComponent(handle));
  } catch (e) {
    // The upload can trail the exit by a moment; keep polling unless the artifact is gone for good.
    if (e instanceof ApiError && e.status === 404) {
      const st = job.artifact_state;
      // partial with nothing stored: the upload failed or the agent was lost; what the gateway kept is in job_output.
      if (st === 'partial') {
        outMsg.say('No stored output (artifact ' + st + ').');
        return true;
      }
      outMsg.say('Waiting for the output to be stored…');
      return false;
    }
    outMsg.fail(e);
    return false;
  }
  outMsg.clear();
  for (const s of STREAMS) {
    const v = outputs[s];
    const meta = info.streams.find((x) => x.stream === s);
    if (!meta) {
      v.info.textContent = 'empty';
      v.pre.replaceChildren();
      v.dl.hidden = true;
      continue;
    }
    try {
      const r = await api<ArtifactChunk>('GET', '/artifacts/' + encodeURIComponent(handle) + '/' + s + '?tail=' + TAIL_BYTES);
      v.pre.replaceChildren(outputText(r.text));
      v.info.textContent =
        fmtBytes(meta.bytes) +
        ', ' +
        meta.lines +
        ' lines' +
        (meta.truncated ? ', truncated at the artifact cap' : '') +
        (r.offset > 0 ? ' · showing the last ' + fmtBytes(r.length) : '');
      v.pre.scrollTop = v.pre.scrollHeight;
      v.dl.hidden = false;
      v.dl.onclick = async () => {
        try {
          const resp = await api('GET', '/artifacts/' + encodeURIComponent(handle) + '/' + s + '/download', undefined, { raw: true });
          saveBlob(await resp.blob(), info.jobId + '-' + s + '.txt');
        } catch (e) {
          outMsg.fail(e);
        }
      };
    } catch (e) {
      outMsg.fail(e);
    }
  }
  return true;
}

/** Searches the job's stored output (GET /artifacts/<handle>/search) and shows the matching lines in context. */
export function searchForm(getHandle: () => string | null): { el: HTMLElement } {
  const terms = h('input', { type: 'search', name: 'terms', required: true, placeholder: 'error, warning' });
  const stream = h(
    'select',
    { name: 'stream' },
    ['both', 'stdout', 'stderr'].map((s) => h('option', { value: s }, s)),
  );
  const ctx = h('input', { type: 'number', name: 'contextLines', min: '0', max: '10', value: '3' });
  const msg = messages();
  const results = h('div', { class: 'results', 'aria-live': 'polite' });
  const form = h(
    'form',
    { class: 'filters', 'aria-label': 'Search the output' },
    field('Search terms', terms, 'comma-separated; case-insensitive; a line matching any term is shown'),
    field('Stream', stream),
    field('Context lines', ctx),
    h('button', { type: 'submit' }, 'Search'),
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    msg.clear();
    const handle = getHandle();
    if (!handle) {
      msg.fail(new Error('this job has no stored output to search yet'));
      return;
    }
    const list = terms.value
      .split(',')
      .map((t) => t.trim())
      .filter(Boolean);
    if (list.length === 0) {
      msg.fail(new Error('enter at least one search term'));
      terms.focus();
      return;
    }
    const q = new URLSearchParams();
    for (const t of list) q.append('q', t);
    q.set('stream', stream.value);
    q.set('contextLines', ctx.value || '0');
    msg.say('Searching…');
    try {
      const r = await api<SearchAnswer>('GET', '/artifacts/' + encodeURIComponent(handle) + '/search?' + q.toString());
      msg.say(r.matchCount + ' matching line' + (r.matchCount === 1 ? '' : 's') + ' in ' + r.totalLines + ' lines (' + r.searchedStreams.join(' + ') + ')');
      results.replaceChildren(...r.excerpts.map((x) => excerpt(x, list)));
    } catch (e) {
      msg.say('');
      msg.fail(e);
    }
  });
  const el = h('section', { 'aria-labelledby': 'search-title' }, h('h2', { id: 'search-title' }, 'Search the output'), form, msg.status, msg.error, results);
  return { el: el };
}

function excerpt(x: SearchAnswer['excerpts'][number], terms: string[]): HTMLElement {
  const lines = x.content.split('\n');
  const lower = terms.map((t) => t.toLowerCase());
  return h(
    'figure',
    { class: 'excerpt' },
    h('figcaption', null, x.source + ' lines ' + x.lineStart + '–' + x.lineEnd),
    h(
      'pre',
      { class: 'output' },
      lines.map((l, i) =>
        h(
          'span',
          { class: 'line' },
          h('span', { class: 'ln', 'aria-hidden': 'true' }, String(x.lineStart + i).padStart(5, ' ') + '  '),
          mark(outputText(l), lower),
          '\n',
        ),
      ),
    ),
  );
}

/** Wraps the matched terms of a line in <mark>, as text nodes only. */
function mark(line: string, lower: string[]): Child[] {
  const l = line.toLowerCase();
  const out: Child[] = [];
  let i = 0;
  while (i < line.length) {
    let best = -1;
    let len = 0;
    for (const t of lower) {
      const p = l.indexOf(t, i);
      if (p !== -1 && (best === -1 || p < best)) {
        best = p;
        len = t.length;
      }
    }
    if (best === -1) break;
    if (best > i) out.push(line.slice(i, best));
    out.push(h('mark', null, line.slice(best, best + len)));
    i = best + len;
  }
  if (i < line.length) out.push(line.slice(i));
  return out;
}
