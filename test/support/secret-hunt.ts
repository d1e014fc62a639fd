/**
 * What a job hunting for a secret it should never see runs (docs/credentials.md): a shell string
 * that prints the job's env, every process's environ and command line, and every match of the
 * patterns in the files under /, then `hunt-done` (a hunt that was refused or crashed also "finds
 * nothing": a test checks it ran to the end). Secrets in a test start with a known marker, so the
 * patterns name the marker and never the value itself.
 */
export function huntScript(patterns: string[], more: string[] = []): string {
  return [
    'env',
    "for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\\0' '\\n' < $f; done 2>/dev/null",
    // /usr is the host's read-only system (no secret there) and slow to read under gVisor; proc, sys and dev are not files.
    `grep -rIsoh --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev --exclude-dir=usr ${patterns.map((p) => `-e '${p}'`).join(' ')} / | head -n 50`,
    ...more,
    'echo hunt-done',
  ].join('; ');
}
