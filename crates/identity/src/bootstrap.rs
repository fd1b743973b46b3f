//! First boot: the `default` tenant (with its tenant key) and the super admin from the
//! environment. Safe to run on every start and from several instances at once.

use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};
use scoped_futures::ScopedFutureExt;
use steward_core::{clock, Error, ErrorKind, Result, Role};
use steward_store::schema::{tenants, users};
use steward_store::{with_conn, DbPool, DbResultExt, Id, Json, Ts};

use crate::keys::RawKey;
use crate::password::hash_password_async;
use crate::rows::{ApiKeyRow, TenantRow, UserRow};

pub const DEFAULT_TENANT: &str = "default";

/// What the bootstrap did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootstrapOutcome {
    /// A super admin already existed; nothing changed.
    AlreadyDone,
    /// The super admin was created; `tenant` is the `default` tenant when it was created too.
    Created {
        tenant: Option<steward_core::TenantId>,
    },
}

/// Ensures that a super admin exists. When the database holds no tenant, creates `default`
/// first. An existing super admin is never altered.
pub async fn bootstrap(db: &DbPool, email: &str, password: &str) -> Result<BootstrapOutcome> {
    let have_super: i64 = with_conn!(db, conn => {
        users::table
            .filter(users::role.eq(Role::SuperAdmin.as_str()))
            .count()
            .get_result(conn)
            .await
            .db()
    })?;
    if have_super > 0 {
        return Ok(BootstrapOutcome::AlreadyDone);
    }
    let hash = hash_password_async(password.to_owned()).await?;
    let email = email.trim().to_lowercase();
    let now = Ts::from(clock::now());
    let (email_ref, hash_ref) = (&email, &hash);
    let result = with_conn!(db, conn => {
        conn.transaction::<_, diesel::result::Error, _>(|conn| {
            async move {
                let existing: Option<Id> = tenants::table
                    .filter(tenants::name.eq(DEFAULT_TENANT))
                    .select(tenants::id)
                    .first(conn)
                    .await
                    .optional()?;
                let (tenant_id, tenant_created) = match existing {
                    Some(id) => (id, None),
                    None => {
                        let tenant = TenantRow {
                            id: Id(uuid::Uuid::now_v7()),
                            name: DEFAULT_TENANT.to_owned(),
                            settings: Json(serde_json::json!({})),
                            created_at: now,
                        };
                        diesel::insert_into(tenants::table).values(&tenant).execute(conn).await?;
                        let key = RawKey::generate();
                        let key_row = ApiKeyRow {
                            id: Id(uuid::Uuid::now_v7()),
                            tenant_id: tenant.id,
                            user_id: None,
                            kind: "tenant".to_owned(),
                            name: Some("tenant key".to_owned()),
                            key_hash: key.hash(),
                            masked: key.masked(),
                            jti: None,
                            created_at: now,
                            expires_at: None,
                            revoked_at: None,
                            last_used_at: None,
                        };
                        diesel::insert_into(steward_store::schema::api_keys::table)
                            .values(&key_row)
                            .execute(conn)
                            .await?;
                        (tenant.id, Some(tenant.id))
                    }
                };
                let user = UserRow {
                    id: Id(uuid::Uuid::now_v7()),
                    tenant_id,
                    email: email_ref.clone(),
                    full_name: "Super Admin".to_owned(),
                    role: Role::SuperAdmin.as_str().to_owned(),
                    password_hash: Some(hash_ref.clone()),
                    is_active: true,
                    auth_provider: None,
                    external_subject: None,
                    created_at: now,
                    updated_at: now,
                    last_login_at: None,
                };
                diesel::insert_into(users::table).values(&user).execute(conn).await?;
                Ok(tenant_created)
            }
            .scope_boxed()
        })
        .await
        .db()
    });
    match result {
        Ok(created) => Ok(BootstrapOutcome::Created {
            tenant: created.map(|id| id.into_id()),
        }),
        // Another instance bootstrapped at the same moment (or the e-mail belongs to an
        // ordinary user): nothing to do, but say so when no super admin exists.
        Err(e) if e.kind == ErrorKind::Conflict => {
            let have_super: i64 = with_conn!(db, conn => {
                users::table
                    .filter(users::role.eq(Role::SuperAdmin.as_str()))
                    .count()
                    .get_result(conn)
                    .await
                    .db()
            })?;
            if have_super > 0 {
                Ok(BootstrapOutcome::AlreadyDone)
            } else {
                Err(Error::conflict(format!(
                    "cannot create the super admin: the e-mail {email} belongs to another user"
                )))
            }
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    steward_store::db_test!(first_boot_creates_tenant_and_super_admin, |db| {
        let first = bootstrap(&db.pool, "Root@Example.test", "a-good-password")
            .await
            .unwrap();
        assert!(matches!(
            first,
            BootstrapOutcome::Created { tenant: Some(_) }
        ));
        let again = bootstrap(&db.pool, "other@example.test", "changed")
            .await
            .unwrap();
        assert_eq!(again, BootstrapOutcome::AlreadyDone);
        let pool = &db.pool;
        let emails: Vec<String> = async {
            with_conn!(pool, conn => users::table.select(users::email).load(conn).await.db())
        }
        .await
        .unwrap();
        assert_eq!(emails, ["root@example.test"]);
    });
}
