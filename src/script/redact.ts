/**
 * Cutting credentials out of error text: a server may repeat what it was sent, raw (a header) or encoded (a
 * form body, a query string), so each secret goes in every form a request carries it.
 */

/** `text` with each secret (of 4 characters or more) replaced by `[redacted]`, raw and URL- or form-encoded. */
export function redactSecrets(text: string, secrets: Iterable<string>): string {
  const forms = new Set<string>();
  for (const s of secrets) {
    if (typeof s !== 'string' || s.length < 4) continue;
    forms.add(s);
    forms.add(encodeURIComponent(s));
    forms.add(new URLSearchParams({ s }).toString().slice(2));
  }
  // Longest first, so a secret that contains another is cut whole.
  for (const f of [...forms].sort((a, b) => b.length - a.length)) text = text.split(f).join('[redacted]');
  return text;
}
