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
        full_name -> Text,
        role -> Text,
        password_hash -> Nullable<Text>,
        is_active -> Bool,
        auth_provider -> Nullable<Text>,
        external_subject -> Nullable<Text>,
        created_at -> DbTime,
        updated_at -> DbTime,
        last_login_at -> Nullable<DbTime>,
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

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::*;

    revoked_tokens (jti) {
        jti -> Text,
        expires_at -> DbTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::*;

    audit_heads (tenant_id) {
        tenant_id -> DbUuid,
        seq -> BigInt,
        hash -> Text,
        purged_seq -> Nullable<BigInt>,
        purged_hash -> Nullable<Text>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::*;

    audit_entries (id) {
        id -> DbUuid,
        tenant_id -> DbUuid,
        seq -> BigInt,
        agent_id -> Nullable<DbUuid>,
        user_id -> Nullable<DbUuid>,
        action -> Text,
        resource -> Text,
        input -> DbJson,
        output -> DbJson,
        reasoning -> DbJson,
        risk_score -> Double,
        is_approved -> Bool,
        timestamp -> DbTime,
        prev_hash -> Text,
        hash -> Text,
        signature -> Nullable<Text>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::*;

    agents (id) {
        id -> DbUuid,
        tenant_id -> DbUuid,
        name -> Text,
        #[sql_name = "type"]
        agent_type -> Text,
        capabilities -> DbJson,
        permissions -> DbJson,
        status -> Text,
        version -> Nullable<Text>,
        predicted_type -> Nullable<Text>,
        type_confidence -> Nullable<Double>,
        risk_score -> Nullable<Double>,
        embedding -> Nullable<Binary>,
        embedding_updated_at -> Nullable<DbTime>,
        created_at -> DbTime,
        updated_at -> DbTime,
        profile_changed_at -> DbTime,
        last_heartbeat -> Nullable<DbTime>,
        active_since -> DbTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::*;

    policies (id) {
        id -> DbUuid,
        tenant_id -> DbUuid,
        name -> Text,
        description -> Text,
        template -> Nullable<Text>,
        rego -> Text,
        is_active -> Bool,
        priority -> BigInt,
        created_at -> DbTime,
        updated_at -> DbTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::*;

    schedules (name) {
        name -> Text,
        owner -> Nullable<Text>,
        next_run_at -> DbTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::*;

    jobs (id) {
        id -> DbUuid,
        tenant_id -> DbUuid,
        kind -> Text,
        status -> Text,
        progress -> Double,
        payload -> DbJson,
        result -> Nullable<DbJson>,
        error -> Nullable<Text>,
        attempts -> Integer,
        lease_owner -> Nullable<Text>,
        lease_expires_at -> Nullable<DbTime>,
        created_at -> DbTime,
        started_at -> Nullable<DbTime>,
        finished_at -> Nullable<DbTime>,
    }
}

diesel::joinable!(users -> tenants (tenant_id));
diesel::joinable!(api_keys -> tenants (tenant_id));
diesel::allow_tables_to_appear_in_same_query!(
    tenants,
    users,
    api_keys,
    revoked_tokens,
    audit_heads,
    audit_entries,
    agents,
    policies,
    schedules,
    jobs,
    discovery_candidates,
    discovery_source_counts,
);

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::*;

    discovery_candidates (id) {
        id -> DbUuid,
        tenant_id -> DbUuid,
        name -> Text,
        fingerprint -> Text,
        source -> Text,
        suggested_type -> Nullable<Text>,
        capabilities -> DbJson,
        score -> Double,
        event_count -> BigInt,
        evidence -> DbJson,
        status -> Text,
        first_seen -> DbTime,
        last_seen -> DbTime,
        agent_id -> Nullable<DbUuid>,
        decided_at -> Nullable<DbTime>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::*;

    discovery_source_counts (tenant_id, source) {
        tenant_id -> DbUuid,
        source -> Text,
        events -> BigInt,
    }
}

// --- hitl ---

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::*;

    hitl_requests (id) {
        id -> DbUuid,
        tenant_id -> DbUuid,
        agent_id -> DbUuid,
        action -> Text,
        resource -> Text,
        context -> DbJson,
        digest -> Text,
        status -> Text,
        requested_at -> DbTime,
        decided_at -> Nullable<DbTime>,
        approver -> Nullable<Text>,
        rejection_reason -> Nullable<Text>,
        decided_by -> Nullable<DbUuid>,
        consumed_at -> Nullable<DbTime>,
    }
}

// --- siem ---

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::*;

    siem_outbox (id) {
        id -> BigInt,
        tenant_id -> DbUuid,
        event_type -> Text,
        payload -> DbJson,
        status -> Text,
        attempts -> Integer,
        maybe_sent -> Bool,
        next_attempt_at -> DbTime,
        last_error -> Nullable<Text>,
        created_at -> DbTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;

    siem_stats (name) {
        name -> Text,
        sent -> BigInt,
        failed -> BigInt,
        duplicates -> BigInt,
        retries -> BigInt,
        last_error -> Nullable<Text>,
    }
}

// --- guard ---

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::*;

    guard_feedback (id) {
        id -> DbUuid,
        tenant_id -> DbUuid,
        prompt -> Text,
        label -> Integer,
        audit_id -> Nullable<DbUuid>,
        created_at -> DbTime,
    }
}

// --- training (shared model store) ---

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::*;

    model_versions (tenant_id, detector, version) {
        tenant_id -> DbUuid,
        detector -> Text,
        version -> Integer,
        model -> Binary,
        feature_version -> Text,
        library_version -> Text,
        metrics -> DbJson,
        sample_count -> BigInt,
        task_id -> Nullable<DbUuid>,
        created_at -> DbTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::*;

    model_active (tenant_id, detector) {
        tenant_id -> DbUuid,
        detector -> Text,
        version -> Integer,
        updated_at -> DbTime,
    }
}

// --- anomaly ---

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::*;

    anomaly_reports (id) {
        id -> DbUuid,
        tenant_id -> DbUuid,
        agent_id -> Nullable<DbUuid>,
        risk_score -> Double,
        source -> Text,
        status -> Text,
        event_data -> DbJson,
        created_at -> DbTime,
        updated_at -> DbTime,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use crate::types::*;

    anomaly_feedback (id) {
        id -> DbUuid,
        tenant_id -> DbUuid,
        event_data -> DbJson,
        label -> Integer,
        source -> Text,
        report_id -> Nullable<DbUuid>,
        created_at -> DbTime,
    }
}
