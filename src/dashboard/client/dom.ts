/**
 * A small DOM builder and the pieces every page is made of: labelled fields, status and error lines, tables, a
 * live region that keeps the keyboard focus, polling, file downloads.
 */
import { describe } from './api.ts';

/** An attribute's value: absent (null, undefined, false), present (true), text, or an 'on*' event listener. */
type AttrValue = string | number | boolean | null | undefined | ((ev: Event) => unknown);
export type Attrs = Record<string, AttrValue>;
/** What an element holds: nodes and text; absent values and false are skipped, arrays flattened. */
export type Child = Node | string | number | null | undefined | false | Child[];

/**
 * h('tag', {attrs}, ...children): builds DOM. Text is always a text node, so data from the API can
 * never become markup. 'on*' attributes become event listeners; 'class', 'for' map to properties.
 */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Attrs | null, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (attrs) {
    for (const k of Object.keys(attrs)) {
      const v = attrs[k];
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'class') el.className = String(v);
      else if (k === 'for') (el as unknown as HTMLLabelElement).htmlFor = String(v);
      else if (k === 'value') (el as unknown as HTMLInputElement).value = String(v);
      else if (k === 'checked') (el as unknown as HTMLInputElement).checked = !!v;
      else if (v === true) el.setAttribute(k, '');
      else el.setAttribute(k, String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el: HTMLElement, children: Child[]): void {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

let ids = 0;
export function uid(prefix: string): string {
  ids += 1;
  return prefix + '-' + ids;
}

/** A labelled control: label + input/select/textarea, optionally a hint. */
export function field(label: string, control: HTMLElement, hint?: string): HTMLDivElement {
  if (!control.id) control.id = uid('f');
  const parts: Child[] = [h('label', { for: control.id }, label), control];
  if (hint) {
    const hid = uid('hint');
    control.setAttribute('aria-describedby', hid);
    parts.push(h('span', { class: 'hint', id: hid }, hint));
  }
  return h('div', { class: 'field' }, parts);
}

export interface Messages {
  status: HTMLParagraphElement;
  error: HTMLParagraphElement;
  say(t?: string): void;
  fail(e: unknown): void;
  clear(): void;
}

/** A polite status line and an assertive error line for a section. */
export function messages(): Messages {
  const status = h('p', { class: 'status', role: 'status' });
  const error = h('p', { class: 'error', role: 'alert' });
  return {
    status: status,
    error: error,
    say(t) {
      status.textContent = t || '';
    },
    fail(e) {
      error.textContent = e ? describe(e) : '';
    },
    clear() {
      status.textContent = '';
      error.textContent = '';
    },
  };
}

/** A table with a caption and header cells (scope=col), one row per item. */
export function table(caption: string, headers: string[], rows: Child): HTMLTableElement {
  return h(
    'table',
    null,
    h('caption', null, caption),
    h(
      'thead',
      null,
      h(
        'tr',
        null,
        headers.map((t) => h('th', { scope: 'col' }, t)),
      ),
    ),
    h('tbody', null, rows),
  );
}

/**
 * Replaces a live region's content without losing the keyboard focus: the control that had focus
 * (found again by its href, aria-label or id) gets it back in the new content.
 */
export function replaceKeepingFocus(el: HTMLElement, content: Node): void {
  const a = document.activeElement;
  const keyOf = (x: Element) => x.getAttribute('href') || x.getAttribute('aria-label') || x.id || null;
  const key = a && a !== el && el.contains(a) ? keyOf(a) : null;
  el.replaceChildren(content);
  if (!key) return;
  const again = Array.from(el.querySelectorAll<HTMLElement>('a, button, [tabindex]')).find((x) => keyOf(x) === key);
  if (again) again.focus();
}

/**
 * Runs fn now and then every ms while the page shows; returns stop(). A slow answer is never
 * overlapped by the next call.
 */
export function poll(fn: () => unknown, ms: number): () => void {
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | null = null;
  const tick = async () => {
    if (stopped) return;
    try {
      await fn();
    } catch {
      /* fn reports its own errors */
    }
    if (!stopped) timer = setTimeout(tick, ms);
  };
  tick();
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}

/** Saves a Blob as a file (downloads go through fetch with the Bearer token, never a tokened URL). */
export function saveBlob(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = h('a', { href: url, download: name });
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
