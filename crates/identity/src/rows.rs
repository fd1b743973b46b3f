//! Database rows of the identity tables.

use diesel::prelude::*;
use steward_store::schema::{api_keys, tenants, users};
use steward_store::{Id, Json, Ts};

#[derive(Queryable, Selectable, Insertable, Clone, Debug)]
#[diesel(table_name = tenants)]
pub struct TenantRow {
    pub id: Id,
    pub name: String,
    pub settings: Json,
    pub created_at: Ts,
}

#[derive(Queryable, Selectable, Insertable, Clone, Debug)]
#[diesel(table_name = users)]
pub struct UserRow {
    pub id: Id,
    pub tenant_id: Id,
    pub email: String,
    pub full_name: String,
    pub role: String,
    pub password_hash: Option<String>,
    pub is_active: bool,
    pub auth_provider: Option<String>,
    pub external_subject: Option<String>,
    pub created_at: Ts,
    pub updated_at: Ts,
    pub last_login_at: Option<Ts>,
}

#[derive(Queryable, Selectable, Insertable, Clone, Debug)]
#[diesel(table_name = api_keys)]
pub struct ApiKeyRow {
    pub id: Id,
    pub tenant_id: Id,
    pub user_id: Option<Id>,
    pub kind: String,
    pub name: Option<String>,
    pub key_hash: String,
    pub masked: String,
    pub jti: Option<String>,
    pub created_at: Ts,
    pub expires_at: Option<Ts>,
    pub revoked_at: Option<Ts>,
    pub last_used_at: Option<Ts>,
}
