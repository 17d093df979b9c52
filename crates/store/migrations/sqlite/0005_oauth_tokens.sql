-- Why: upstream servers' OAuth tokens move from one JSON file per server (data_dir/oauth) into the
-- store, sealed with AES-256-GCM: the row holds the nonce and the ciphertext (tag appended), never
-- the key; the server name is the associated data, so a row moved to another name does not open.
CREATE TABLE oauth_tokens (
    server TEXT PRIMARY KEY NOT NULL,
    nonce BLOB NOT NULL,
    ciphertext BLOB NOT NULL,
    updated_at_ms INTEGER NOT NULL
);
