-- Who minted each token (src/auth/minter.ts): 'bootstrap' (offline, with the signing key) or
-- 'member:<member_id>', with that member's role when they minted it. NULL: minted before minters were
-- recorded (such tokens act at most as an admin). When a member is demoted or removed, the tokens they
-- minted that their new role no longer covers are revoked at once, found through this index.
ALTER TABLE tokens ADD COLUMN minted_by TEXT;
ALTER TABLE tokens ADD COLUMN minter_role TEXT;
-- The `kid` of the signing key that signed the token: a rotated-out key is retired once no live token
-- names it (docs/operations.md, "Rotating the signing key").
ALTER TABLE tokens ADD COLUMN signing_kid TEXT;
CREATE INDEX tokens_minted_by ON tokens (team, minted_by);
