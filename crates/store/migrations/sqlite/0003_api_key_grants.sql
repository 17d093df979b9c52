-- Why: API keys move from api-keys.json into the store, and each key carries what it grants:
-- its scopes and groups (JSON arrays of strings). At most one active key per name, as the file
-- enforced, so `manifold keys revoke NAME` and the identity a name proves stay unambiguous.
ALTER TABLE api_keys ADD COLUMN scopes_json TEXT NOT NULL DEFAULT '[]';
ALTER TABLE api_keys ADD COLUMN groups_json TEXT NOT NULL DEFAULT '[]';
CREATE UNIQUE INDEX api_keys_one_active_name ON api_keys (name) WHERE revoked_at_ms IS NULL;
