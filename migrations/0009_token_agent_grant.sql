-- An agent token's grant (JSON: sandboxes, labels, agentId — src/contracts/agent-grant.ts): what its
-- agents may claim in `hello`, shown by the token list. NULL: a token without a grant, whose agents
-- claim what they say. The token itself carries the grant; this copy is for people reading the list.
ALTER TABLE tokens ADD COLUMN agent_grant TEXT;
