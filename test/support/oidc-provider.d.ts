/** The few parts of `oidc-provider` (which ships no types) that test/support/oidc-idp.ts uses. */
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';
  interface GrantInstance { addOIDCScope(scope: string): void; save(): Promise<string> }
  export default class Provider {
    constructor(issuer: string, config: Record<string, unknown>);
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<{ uid: string }>;
    interactionFinished(req: IncomingMessage, res: ServerResponse, result: Record<string, unknown>, o?: { mergeWithLastSubmission?: boolean }): Promise<void>;
    Grant: new (o: { accountId: string; clientId: string }) => GrantInstance;
  }
}
