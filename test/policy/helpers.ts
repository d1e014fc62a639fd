/** Builders for policy tests: a parsed policy from a partial document, and a request with defaults. */
import { PolicyDocument, type PolicyDocumentInput } from '../../src/contracts/policy.ts';
import { decide, type DecideOptions, type PolicyDecision, type PolicyRequest } from '../../src/policy/engine.ts';

export function policy(patch: Partial<PolicyDocumentInput> = {}): PolicyDocument {
  return PolicyDocument.parse({ version: 1, ...patch });
}

export function request(r: Partial<PolicyRequest> & Pick<PolicyRequest, 'command'>): PolicyRequest {
  return { tool: 'execute', mode: 'argv', args: [], team: 'team-a', subject: 'user-1', ...r };
}

/** argv request shorthand: `run(p, 'git', 'status')`. */
export function run(p: PolicyDocument, command: string, ...args: string[]): Promise<PolicyDecision> {
  return decide(p, request({ command, args }));
}

export function check(p: PolicyDocument, r: Partial<PolicyRequest> & Pick<PolicyRequest, 'command'>, o?: DecideOptions): Promise<PolicyDecision> {
  return decide(p, request(r), o);
}
