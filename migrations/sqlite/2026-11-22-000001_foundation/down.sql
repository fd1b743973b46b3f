DROP TABLE revoked_tokens;
DROP TABLE api_keys;
DROP TABLE users;
DROP TABLE tenants;
