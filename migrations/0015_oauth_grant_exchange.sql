-- When a grant's authorization code was exchanged for its first tokens: until then the grant is
-- pending (or, once the code's ten minutes have passed, never completed). Grants recorded before this
-- column existed are taken as exchanged at their creation.
ALTER TABLE oauth_grants ADD COLUMN code_exchanged_at INTEGER;
UPDATE oauth_grants SET code_exchanged_at = created_at;
