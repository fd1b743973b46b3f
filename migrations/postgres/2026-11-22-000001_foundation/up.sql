-- Tenants, users and API keys (the tenant key is an API key of kind 'tenant').
CREATE TABLE tenants (
    id uuid PRIMARY KEY,
    name text NOT NULL,
    settings jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL
);
-- Tenant names are unique regardless of case.
CREATE UNIQUE INDEX tenants_name_key ON tenants (lower(name));

CREATE TABLE users (
    id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    email text NOT NULL,
    full_name text NOT NULL DEFAULT '',
    role text NOT NULL CHECK (role IN ('super_admin', 'admin', 'security_analyst', 'developer', 'viewer')),
    password_hash text,
    is_active boolean NOT NULL DEFAULT true,
    auth_provider text,
    external_subject text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    last_login_at timestamptz
);
-- Emails are stored lower-cased; one account per address on the platform.
CREATE UNIQUE INDEX users_email_key ON users (email);
CREATE UNIQUE INDEX users_external_key ON users (auth_provider, external_subject)
    WHERE external_subject IS NOT NULL;
CREATE INDEX users_tenant_created_idx ON users (tenant_id, created_at DESC, id DESC);

CREATE TABLE api_keys (
    id uuid PRIMARY KEY,
    tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    user_id uuid REFERENCES users (id) ON DELETE CASCADE,
    kind text NOT NULL CHECK (kind IN ('tenant', 'personal', 'session')),
    name text,
    key_hash text NOT NULL,
    masked text NOT NULL,
    jti text,
    created_at timestamptz NOT NULL,
    expires_at timestamptz,
    revoked_at timestamptz,
    last_used_at timestamptz
);
CREATE UNIQUE INDEX api_keys_hash_key ON api_keys (key_hash);
CREATE INDEX api_keys_user_idx ON api_keys (user_id, created_at DESC);
CREATE INDEX api_keys_tenant_idx ON api_keys (tenant_id, kind);

-- Revoked access tokens (logout), kept until they would have expired anyway.
CREATE TABLE revoked_tokens (
    jti text PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
CREATE INDEX revoked_tokens_expires_idx ON revoked_tokens (expires_at);
