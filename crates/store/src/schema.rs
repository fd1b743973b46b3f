//! The one schema of both backends (see `types` for the portable column types).
//! Kept by hand in step with `migrations/postgres` and `migrations/sqlite`.

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::*;

    tenants (id) {
        id -> DbUuid,
        name -> Text,
        settings -> DbJson,
        created_at -> DbTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::*;

    users (id) {
        id -> DbUuid,
        tenant_id -> DbUuid,
        email -> Text,
        full_name -> Nullable<Text>,
        role -> Text,
        password_hash -> Nullable<Text>,
        is_active -> Bool,
        auth_provider -> Nullable<Text>,
        external_subject -> Nullable<Text>,
        created_at -> DbTime,
        updated_at -> DbTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::*;

    api_keys (id) {
        id -> DbUuid,
        tenant_id -> DbUuid,
        user_id -> Nullable<DbUuid>,
        kind -> Text,
        name -> Nullable<Text>,
        key_hash -> Text,
        masked -> Text,
        jti -> Nullable<Text>,
        created_at -> DbTime,
        expires_at -> Nullable<DbTime>,
        revoked_at -> Nullable<DbTime>,
        last_used_at -> Nullable<DbTime>,
    }
}

diesel::joinable!(users -> tenants (tenant_id));
diesel::joinable!(api_keys -> tenants (tenant_id));
diesel::allow_tables_to_appear_in_same_query!(tenants, users, api_keys);
