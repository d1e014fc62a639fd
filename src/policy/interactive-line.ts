/** One line saying whether a team's policy lets jobs take input after their start (policy_check's text). */
import type { InteractivePolicy } from '../contracts/interactive.ts';

export function interactiveLine(p: InteractivePolicy): string {
  if (!p.enabled) return 'interactive input: off (interactive.enabled = false): jobs cannot take job_input or a tty';
  return (
    `interactive input: ON — job_input writes to a running job's stdin, which for an interpreter is code the screens never saw; ` +
    `${p.maxSessions} sessions at most, stopped after ${p.idleTtlMs} ms idle or ${p.maxLifetimeMs} ms, ${p.maxInputBytes} bytes a write` +
    (p.auditInputText ? ', text kept in the audit' : '')
  );
}
