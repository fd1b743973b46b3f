-- Tenants, users and API keys (the tenant key is an API key of kind 'tenant').
-- Portable types: uuid = BLOB(16), timestamps = TEXT (RFC 3339, 6 digits, Z), json = TEXT,
-- booleans = INTEGER 0/1.
CREATE TABLE tenants (
    id BLOB PRIMARY KEY NOT NULL CHECK (length(id) = 16),
    name TEXT NOT NULL,
    settings TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL
);
-- Tenant names are unique regardless of case.
CREATE UNIQUE INDEX tenants_name_key ON tenants (lower(name));

CREATE TABLE users (
    id BLOB PRIMARY KEY NOT NULL CHECK (length(id) = 16),
    tenant_id BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    email TEXT NOT NULL,
    full_name TEXT NOT NULL DEFAULT '',
    role TEXT NOT NULL CHECK (role IN ('super_admin', 'admin', 'security_analyst', 'developer', 'viewer')),
    password_hash TEXT,
    is_active INTEGER NOT NULL DEFAULT 1 CHECK (is_active IN (0, 1)),
    auth_provider TEXT,
    external_subject TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    last_login_at TEXT
);
CREATE UNIQUE INDEX users_email_key ON users (email);
CREATE UNIQUE INDEX users_external_key ON users (auth_provider, external_subject)
    WHERE external_subject IS NOT NULL;
CREATE INDEX users_tenant_created_idx ON users (tenant_id, created_at DESC, id DESC);

CREATE TABLE api_keys (
    id BLOB PRIMARY KEY NOT NULL CHECK (length(id) = 16),
    tenant_id BLOB NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    user_id BLOB REFERENCES users (id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('tenant', 'personal', 'session')),
    name TEXT,
    key_hash TEXT NOT NULL,
    masked TEXT NOT NULL,
    jti TEXT,
    created_at TEXT NOT NULL,
    expires_at TEXT,
    revoked_at TEXT,
    last_used_at TEXT
);
CREATE UNIQUE INDEX api_keys_hash_key ON api_keys (key_hash);
CREATE INDEX api_keys_user_idx ON api_keys (user_id, created_at DESC);
CREATE INDEX api_keys_tenant_idx ON api_keys (tenant_id, kind);

-- Revoked access tokens (logout), kept until they would have expired anyway.
CREATE TABLE revoked_tokens (
    jti TEXT PRIMARY KEY NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX revoked_tokens_expires_idx ON revoked_tokens (expires_at);
