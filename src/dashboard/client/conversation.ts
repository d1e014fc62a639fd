/**
 * An interactive job's conversation on its page: each write (`inputs` of GET /jobs/<id>/output?stream=stdout) shown
 * where it fell in stdout, as it happens. The text of a write only where the policy keeps it; otherwise its size.
 */
import type { SessionInputView } from './answers.ts';
import { h } from './dom.ts';
import { outputText } from './format.ts';

export interface Conversation {
  el: HTMLElement;
  /** New stdout text from the live tail, and the writes so far. */
  update(stdoutText: string, inputs: SessionInputView[] | undefined): void;
}

export function conversationView(): Conversation {
  const pre = h('pre', { class: 'output', tabindex: '0', 'aria-label': 'conversation' });
  const el = h('section', { class: 'stream', 'aria-label': 'conversation', hidden: true }, h('h3', null, 'Conversation'), pre);
  const chunks: Uint8Array[] = [];
  return {
    el,
    update(stdoutText, inputs) {
      if (stdoutText) chunks.push(new TextEncoder().encode(stdoutText));
      if (!inputs?.length) return;
      const all = new Uint8Array(chunks.reduce((n, c) => n + c.byteLength, 0));
      let at = 0;
      for (const c of chunks) {
        all.set(c, at);
        at += c.byteLength;
      }
      const text = (a: number, b: number) => outputText(new TextDecoder().decode(all.subarray(Math.min(a, all.byteLength), Math.min(b, all.byteLength))));
      const parts: (string | HTMLElement)[] = [];
      let from = 0;
      for (const i of inputs) {
        parts.push(text(from, i.stdout_at));
        from = i.stdout_at;
        const shown = i.text !== undefined ? outputText(i.text) : `(${i.bytes} bytes)`;
        parts.push(h('strong', { class: 'input' }, `› ${shown}${i.eof ? ' [eof]' : ''}${shown.endsWith('\n') ? '' : '\n'}`));
      }
      parts.push(text(from, all.byteLength));
      pre.replaceChildren(...parts);
      el.hidden = false;
    },
  };
}
