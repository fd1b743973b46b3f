//! Response shapes of the identity endpoints.

use serde::Serialize;
use serde_json::Value;
use steward_core::clock::format_timestamp;

use crate::rows::{ApiKeyRow, TenantRow, UserRow};

fn ts(t: steward_store::Ts) -> String {
    format_timestamp(t.0)
}

/// The user object (contract 8.1). Never carries a password or hash.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct UserView {
    pub id: String,
    pub email: String,
    pub full_name: String,
    #[schema(schema_with = steward_core::schema::role)]
    pub role: String,
    pub tenant_id: String,
    pub is_active: bool,
    pub auth_provider: Option<String>,
    pub external_subject: Option<String>,
    #[schema(schema_with = steward_core::schema::timestamp)]
    pub created_at: String,
    #[schema(schema_with = steward_core::schema::timestamp)]
    pub updated_at: String,
    #[schema(schema_with = steward_core::schema::nullable_timestamp)]
    pub last_login_at: Option<String>,
}

impl From<UserRow> for UserView {
    fn from(u: UserRow) -> Self {
        UserView {
            id: u.id.0.hyphenated().to_string(),
            email: u.email,
            full_name: u.full_name,
            role: u.role,
            tenant_id: u.tenant_id.0.hyphenated().to_string(),
            is_active: u.is_active,
            auth_provider: u.auth_provider,
            external_subject: u.external_subject,
            created_at: ts(u.created_at),
            updated_at: ts(u.updated_at),
            last_login_at: u.last_login_at.map(ts),
        }
    }
}

/// The user summary inside a login response.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct LoginUser {
    pub id: String,
    pub email: String,
    #[schema(schema_with = steward_core::schema::role)]
    pub role: String,
    pub tenant_id: String,
    pub full_name: String,
}

/// `LoginResponse` (contract 7.1).
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct LoginResponse {
    pub access_token: String,
    pub token_type: &'static str,
    pub expires_in: i64,
    pub user: LoginUser,
    pub api_key: String,
}

/// A personal API key; `key` only in the creation response.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct ApiKeyView {
    pub id: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    pub masked_key: String,
    #[schema(schema_with = steward_core::schema::timestamp)]
    pub created_at: String,
    #[schema(schema_with = steward_core::schema::nullable_timestamp)]
    pub last_used_at: Option<String>,
}

impl ApiKeyView {
    pub fn from_row(k: ApiKeyRow, raw: Option<String>) -> Self {
        ApiKeyView {
            id: k.id.0.hyphenated().to_string(),
            name: k.name.unwrap_or_default(),
            key: raw,
            masked_key: k.masked,
            created_at: ts(k.created_at),
            last_used_at: k.last_used_at.map(ts),
        }
    }
}

/// A tenant at creation, with its raw key (shown once).
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct CreatedTenant {
    pub id: String,
    pub name: String,
    pub settings: Value,
    pub api_key: String,
    #[schema(schema_with = steward_core::schema::timestamp)]
    pub created_at: String,
}

/// A tenant in lists and status: the key only masked.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
pub struct TenantView {
    pub id: String,
    pub name: String,
    pub settings: Value,
    #[schema(schema_with = steward_core::schema::timestamp)]
    pub created_at: String,
    pub api_key_masked: Option<String>,
}

impl TenantView {
    pub fn from_row(t: TenantRow, masked: Option<String>) -> Self {
        TenantView {
            id: t.id.0.hyphenated().to_string(),
            name: t.name,
            settings: t.settings.0,
            created_at: ts(t.created_at),
            api_key_masked: masked,
        }
    }
}
