/**
 * The host side of MCP Apps (SEP-1865) for the job page, so a user sees the job's `ui://gatehouse/job-output.html`
 * view as a chat client shows it. The view is the document `resources/read` returns, served at
 * /dashboard/app/job-output.html under the CSP its resource declares, in an iframe sandboxed to allow-scripts only
 * (an opaque origin: it reaches neither this page nor the admin token). It speaks JSON-RPC over postMessage:
 * ui/initialize, then the host sends the tool input and result, and the view's tools/call requests come back here.
 * This host answers only the read tools the view uses, only about the job shown, through the admin API in the
 * shapes the MCP tools answer with.
 */
import { ApiError, api } from './api.ts';
import type { AdminJob, LiveOutput } from './answers.ts';
import { h } from './dom.ts';

const APP_FRAME_URL = '/dashboard/app/job-output.html';
const PROTOCOL_VERSION = '2026-01-26';
const MAX_HEIGHT = 1200;

/** A JSON-RPC message from the view, as far as this host reads it. */
interface ViewMessage {
  jsonrpc: '2.0';
  id?: string | number | null;
  method: string;
  params?: { height?: unknown; name?: unknown; arguments?: unknown };
}

type ToolAnswer = { result: unknown; error?: undefined } | { error: string; result?: undefined };

/** Renders the view of job j into section; returns close(), which tears it down. */
export function openAppView(section: HTMLElement, j: AdminJob): () => void {
  const jobId = j.job_id;
  const handle = j.artifact_handle;
  const frame = h('iframe', {
    sandbox: 'allow-scripts',
    src: APP_FRAME_URL,
    title: 'MCP Apps view of job ' + jobId,
    class: 'appframe',
    'data-job': jobId,
    referrerpolicy: 'no-referrer',
  });
  const note = h(
    'p',
    { class: 'sub' },
    "The job's MCP Apps view (ui://gatehouse/job-output.html) as a chat client shows it: a sandboxed frame that reads the job through this page.",
  );
  section.replaceChildren(h('h2', { id: 'app-title' }, 'MCP Apps view'), note, frame);
  const post = (message: object) => frame.contentWindow?.postMessage(message, '*');
  const reply = (id: ViewMessage['id'], result: unknown) => post({ jsonrpc: '2.0', id: id, result: result });
  const replyError = (id: ViewMessage['id'], code: number, message: string) => post({ jsonrpc: '2.0', id: id, error: { code: code, message: message } });
  const notify = (method: string, params: unknown) => post({ jsonrpc: '2.0', method: method, params: params });

  const onMessage = async (ev: MessageEvent) => {
    // Only the frame this page made; its origin is opaque ("null"), so the window is what identifies it.
    if (!frame.contentWindow || ev.source !== frame.contentWindow) return;
    const m = ev.data as ViewMessage | null;
    if (!m || typeof m !== 'object' || m.jsonrpc !== '2.0' || typeof m.method !== 'string') return;
    const isRequest = m.id !== undefined && m.id !== null;
    if (m.method === 'ui/initialize' && isRequest) {
      reply(m.id, {
        protocolVersion: PROTOCOL_VERSION,
        hostInfo: { name: 'gatehouse-dashboard', version: '1.0.0' },
        hostCapabilities: { serverTools: {} },
        hostContext: { theme: 'light', displayMode: 'inline', availableDisplayModes: ['inline'], locale: navigator.language },
      });
    } else if (m.method === 'ui/notifications/initialized') {
      notify('ui/notifications/tool-input', { arguments: toolInput(j) });
      notify('ui/notifications/tool-result', toolResult(j));
    } else if (m.method === 'ui/notifications/size-changed') {
      const height = Number(m.params?.height);
      if (Number.isFinite(height) && height > 0) frame.style.height = Math.min(Math.ceil(height), MAX_HEIGHT) + 'px';
    } else if (m.method === 'tools/call' && isRequest) {
      const answer = await callTool(jobId, handle, m.params || {});
      if (answer.error) replyError(m.id, -32602, answer.error);
      else reply(m.id, answer.result);
    } else if (m.method === 'ping' && isRequest) {
      reply(m.id, {});
    } else if (isRequest) {
      replyError(m.id, -32601, 'Method not found: the dashboard does not offer ' + String(m.method).slice(0, 80) + ' to this view');
    }
  };
  window.addEventListener('message', onMessage);
  return () => {
    window.removeEventListener('message', onMessage);
    post({ jsonrpc: '2.0', id: 'teardown', method: 'ui/resource-teardown', params: {} });
    frame.remove();
  };
}

/** The call as the tool received it (the view is told, as a host tells it); the command as the audit log keeps it. */
function toolInput(j: AdminJob): Record<string, unknown> {
  const c = j.call?.command;
  if (!c || typeof c !== 'object' || Array.isArray(c)) return {};
  if (c.runtime) return { runtime: c.runtime, args: c.args || [] };
  return c.mode === 'shell' ? { command: c.command } : { command: c.command, args: c.args || [] };
}

/** The job as a job-starting tool's result names it: the view follows it from its id and artifact handle. */
function toolResult(j: AdminJob) {
  const sc = { job_id: j.job_id, artifact_handle: j.artifact_handle, state: j.state };
  return { content: [{ type: 'text', text: 'job ' + j.job_id + ' ' + j.state }], structuredContent: sc };
}

function result(structured: unknown): ToolAnswer {
  return { result: { content: [{ type: 'text', text: JSON.stringify(structured) }], structuredContent: structured } };
}
function toolFailure(e: unknown): ToolAnswer {
  const message = e instanceof ApiError ? e.message : (e as Error | null)?.message || String(e);
  return { result: { isError: true, content: [{ type: 'text', text: 'Error: ' + message }] } };
}

const enc = encodeURIComponent;

/** tools/call from the view: the three read tools it uses, about this job only. */
async function callTool(jobId: string, handle: string, p: NonNullable<ViewMessage['params']>): Promise<ToolAnswer> {
  const a = (p.arguments && typeof p.arguments === 'object' ? p.arguments : {}) as Record<string, unknown>;
  const name = String(p.name);
  try {
    if (name === 'job_status' || name === 'job_output') {
      if (a.job_id !== jobId) return { error: name + ' is answered here only about job ' + jobId };
      if (name === 'job_status') {
        const r = await api<{ job: AdminJob }>('GET', '/jobs/' + enc(jobId));
        const view: Partial<AdminJob> = Object.assign({}, r.job);
        delete view.call;
        return result(view);
      }
      const stream = a.stream === 'stderr' ? 'stderr' : 'stdout';
      const q = new URLSearchParams({ stream: stream, offset: String(Number.isInteger(a.offset) && (a.offset as number) >= 0 ? a.offset : 0) });
      if (Number.isInteger(a.max_bytes) && (a.max_bytes as number) > 0) q.set('length', String(a.max_bytes));
      const r = await api<LiveOutput>('GET', '/jobs/' + enc(jobId) + '/output?' + q.toString());
      return result({
        job_id: jobId,
        stream: stream,
        state: r.state,
        data: r.text,
        offset: r.offset,
        next_offset: r.nextOffset,
        eof: r.eof,
        source: r.source,
        total_bytes: r.totalBytes,
        // An interactive job's writes, as job_output answers them: the view's conversation.
        ...(r.inputs ? { inputs: r.inputs } : {}),
      });
    }
    if (name === 'query_output') {
      if (!handle || a.artifactHandle !== handle) return { error: 'query_output is answered here only about artifact ' + handle + ' (job ' + jobId + ')' };
      const q = new URLSearchParams();
      for (const t of Array.isArray(a.queryTerms) ? a.queryTerms : []) q.append('q', String(t));
      if (a.stream) q.set('stream', String(a.stream));
      if (a.contextLines !== undefined) q.set('contextLines', String(a.contextLines));
      if (a.maxExcerpts !== undefined) q.set('maxExcerpts', String(a.maxExcerpts));
      return result(await api('GET', '/artifacts/' + enc(handle) + '/search?' + q.toString()));
    }
    return { error: 'the dashboard forwards only job_status, job_output and query_output from this view, not ' + name.slice(0, 60) };
  } catch (e) {
    return toolFailure(e);
  }
}
