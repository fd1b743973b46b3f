//! User management (contract 8): the role-assignment rules live here, not in handlers.

use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};
use scoped_futures::ScopedFutureExt;
use serde_json::{json, Value};
use steward_core::validate::{Fields, Query};
use steward_core::{
    clock, parse_path_id, Body, Error, Op, Page, PageRequest, Principal, Result, Role, TenantId,
    UserId,
};
use steward_store::schema::{tenants, users};
use steward_store::{with_conn, DbResultExt, Id, Ts};

use crate::password::{
    hash_password_async, verify_password_async, MAX_PASSWORD_CHARS, MIN_PASSWORD_CHARS,
};
use crate::rows::UserRow;
use crate::service::{role_of, Identity};
use crate::views::UserView;

/// The longest `search` of `GET /users` (the longest email address).
pub const SEARCH_MAX_CHARS: usize = 320;

/// Maximum page size of the users list (contract 4).
pub const USERS_MAX_LIMIT: i64 = 100;
const ROLE_NAMES: [&str; 5] = [
    "super_admin",
    "admin",
    "security_analyst",
    "developer",
    "viewer",
];
/// Passwords accepted for local users (contract 8.3: 8 to 128 characters).
const PASSWORD_MAX: usize = 128;

diesel::define_sql_function!(fn lower(x: diesel::sql_types::Text) -> diesel::sql_types::Text);

/// A valid e-mail has one `@`, a non-empty local part and a domain containing a dot.
pub fn valid_email(email: &str) -> bool {
    let mut parts = email.split('@');
    let (Some(local), Some(domain), None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    !local.is_empty()
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && email.len() <= 254
        && !email
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || steward_core::validate::is_invisible(c))
}

fn check_password(f: &mut Fields<'_>, name: &str, password: Option<&str>) -> Option<String> {
    let password = password?;
    let n = password.chars().count();
    if n < MIN_PASSWORD_CHARS || n > PASSWORD_MAX.min(MAX_PASSWORD_CHARS) {
        f.error(
            name,
            format!("must be {MIN_PASSWORD_CHARS} to {PASSWORD_MAX} characters"),
        );
        return None;
    }
    Some(password.to_owned())
}

fn escape_like(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('%');
    for c in s.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

/// A user addressed by an operation, with the caller's rights on it checked.
struct Target {
    row: UserRow,
    id: UserId,
    tenant: TenantId,
    role: Role,
}

impl Identity {
    async fn user_row(&self, id: UserId) -> Result<Option<UserRow>> {
        with_conn!(&self.db, conn => {
            users::table
                .filter(users::id.eq(Id(id.0)))
                .select(UserRow::as_select())
                .first(conn)
                .await
                .optional()
                .db()
        })
    }

    /// The caller's own record (JWT or user key).
    async fn me_row(&self, p: &Principal) -> Result<UserRow> {
        let Some(id) = p.user else {
            return Err(Error::forbidden("this operation needs a user credential"));
        };
        self.user_row(id)
            .await?
            .ok_or_else(|| Error::invalid_credentials("the user no longer exists"))
    }

    /// Looks a user up within the caller's scope (an admin sees the own tenant, a super admin
    /// every tenant). Out of scope answers 404 like an unknown id.
    async fn target(&self, p: &Principal, id: &str) -> Result<Target> {
        let id: UserId = parse_path_id(id, "user")?;
        let row = self
            .user_row(id)
            .await?
            .filter(|u| p.is_super_admin() || u.tenant_id.0 == p.tenant.0)
            .ok_or_else(|| Error::not_found(format!("user {id} was not found")))?;
        Ok(Target {
            id,
            tenant: row.tenant_id.into_id(),
            role: role_of(&row.role)?,
            row,
        })
    }

    fn not_higher(p: &Principal, target: &Target) -> Result<()> {
        if target.role > p.role {
            return Err(Error::forbidden(format!(
                "a {} cannot manage a user whose role is {}",
                p.role, target.role
            )));
        }
        Ok(())
    }

    fn not_self(p: &Principal, target: &Target, what: &str) -> Result<()> {
        if p.user == Some(target.id) {
            return Err(Error::conflict(format!(
                "you cannot {what} your own account"
            )));
        }
        Ok(())
    }

    fn assignable(p: &Principal, role: Role) -> Result<()> {
        if role > p.role {
            return Err(Error::forbidden(format!(
                "a {} cannot assign the role {role}",
                p.role
            )));
        }
        Ok(())
    }

    // ------------------------------------------------------------------ self service

    /// `GET /users/me`, `GET /auth/me`.
    pub async fn me(&self, p: &Principal) -> Result<UserView> {
        Ok(self.me_row(p).await?.into())
    }

    /// `PUT /users/me`: only `full_name` changes.
    pub async fn update_me(&self, p: &Principal, body: &Body) -> Result<UserView> {
        let value = body.parse::<Value>()?;
        let mut f = Fields::root(&value);
        let full_name = f.optional_str("full_name", 0, 200).map(str::to_owned);
        f.finish()?;
        let me = self.me_row(p).await?;
        if let Some(name) = full_name {
            self.set_fields(me.id, Some(name)).await?;
        }
        Ok(self.me_row(p).await?.into())
    }

    /// `POST /users/me/change-password`.
    pub async fn change_password(&self, p: &Principal, body: &Body) -> Result<()> {
        let value = body.parse::<Value>()?;
        let mut f = Fields::root(&value);
        let current = f
            .required_str("current_password", 1, 1024)
            .map(str::to_owned);
        let new = f.required_str("new_password", 0, usize::MAX);
        let new = check_password(&mut f, "new_password", new);
        let me = self.me_row(p).await?;
        let Some(stored) = me.password_hash.clone() else {
            return Err(Error::conflict(
                "single sign-on users have no local password",
            ));
        };
        // Every invalid field is listed (contract 3): a wrong current password beside a
        // new one that is too short names both.
        if let Some(current) = current {
            if !verify_password_async(stored, current).await? {
                f.error("current_password", "is not the current password");
            }
        }
        f.finish()?;
        let Some(new) = new else {
            return Err(Error::internal_msg("validated password fields missing"));
        };
        let hash = hash_password_async(new).await?;
        // The other sessions end; the caller's own stays.
        self.replace_password(me.id, hash, p.jti.as_deref()).await?;
        let id: UserId = me.id.into_id();
        self.record(
            p.tenant,
            Some(id),
            "user.password_changed",
            format!("user:{id}"),
            json!({}),
        )
        .await;
        Ok(())
    }

    // ------------------------------------------------------------------ administration

    /// `POST /users`.
    pub async fn create_user(&self, p: &Principal, body: &Body) -> Result<UserView> {
        p.authorize(Op::UsersManage)?;
        let value = body.parse::<Value>()?;
        let mut f = Fields::root(&value);
        let email = f
            .required_str("email", 1, 254)
            .map(|e| e.trim().to_lowercase());
        if let Some(e) = &email {
            if !valid_email(e) {
                f.error("email", "is not a valid e-mail address");
            }
        }
        let auth_provider = f.optional_str("auth_provider", 1, 100).map(str::to_owned);
        if let Some(provider) = &auth_provider {
            if !self.config.sso_providers.contains(provider) {
                f.error("auth_provider", "is not a configured SSO provider");
            }
        }
        // The provider's subject belongs to a pre-provisioned single sign-on user; a local
        // user has none (contract 8.1), whatever the body says.
        let external_subject = f
            .optional_str("external_subject", 1, 255)
            .map(str::to_owned)
            .filter(|_| auth_provider.is_some());
        let password = if auth_provider.is_some() {
            if f.present("password") {
                f.error("password", "must be absent for a single sign-on user");
            }
            None
        } else {
            let raw = f.required_str("password", 0, usize::MAX);
            check_password(&mut f, "password", raw)
        };
        let full_name = f
            .optional_str("full_name", 0, 200)
            .unwrap_or_default()
            .to_owned();
        let role = f
            .optional_enum("role", &ROLE_NAMES)
            .and_then(|r| r.parse::<Role>().ok())
            .unwrap_or(Role::Viewer);
        // Only a super admin's `tenant_id` is read; an admin's is ignored (contract 8.2), so
        // it is not checked either.
        let tenant_id = if p.is_super_admin() {
            f.optional_uuid("tenant_id")
        } else {
            None
        };
        f.finish()?;
        let Some(email) = email else {
            return Err(Error::internal_msg("validated e-mail missing"));
        };

        // An admin's users join the admin's tenant; a super admin may name another tenant.
        let tenant = match tenant_id {
            Some(t) if p.is_super_admin() => {
                let exists: i64 = with_conn!(&self.db, conn => {
                    tenants::table.filter(tenants::id.eq(Id(t))).count().get_result(conn).await.db()
                })?;
                if exists == 0 {
                    return Err(Error::invalid_field("tenant_id", "no such tenant"));
                }
                TenantId(t)
            }
            _ => p.tenant,
        };
        Self::assignable(p, role)?;

        let password_hash = match password {
            Some(pw) => Some(hash_password_async(pw).await?),
            None => None,
        };
        let now = Ts(clock::now());
        let row = UserRow {
            id: Id(uuid::Uuid::now_v7()),
            tenant_id: Id(tenant.0),
            email,
            full_name,
            role: role.as_str().to_owned(),
            password_hash,
            is_active: true,
            auth_provider,
            external_subject,
            created_at: now,
            updated_at: now,
            last_login_at: None,
        };
        with_conn!(&self.db, conn => {
            diesel::insert_into(users::table).values(&row).execute(conn).await.db()
        })
        .map_err(|e| {
            if e.kind == steward_core::ErrorKind::Conflict {
                Error::conflict("a user with this e-mail (or SSO subject) already exists")
            } else {
                e
            }
        })?;
        let id: UserId = row.id.into_id();
        self.record(
            tenant,
            p.user,
            "user.created",
            format!("user:{id}"),
            json!({"email": row.email, "role": row.role}),
        )
        .await;
        Ok(row.into())
    }

    /// `GET /users`: filters `role`, `is_active`, `search`, `tenant_id` (super admin).
    pub async fn list_users(
        &self,
        p: &Principal,
        pairs: &[(String, String)],
    ) -> Result<Page<UserView>> {
        p.authorize(Op::UsersManage)?;
        let mut q = Query::new(pairs);
        let page = PageRequest::read(&mut q, USERS_MAX_LIMIT);
        let role = q.one_of("role", &ROLE_NAMES).map(str::to_owned);
        let is_active = q.bool("is_active");
        let search = q.string("search");
        // Longer than any email or name it could match (and than the patterns the database
        // accepts: SQLite refuses a LIKE pattern over 50,000 bytes).
        if search.is_some_and(|s| s.chars().count() > SEARCH_MAX_CHARS) {
            q.error("search", format!("at most {SEARCH_MAX_CHARS} characters"));
        }
        let search = search.map(|s| escape_like(&self.db.sql_lower(s)));
        let tenant_filter: Option<uuid::Uuid> = q.parse("tenant_id", "a UUID");
        q.finish()?;
        let tenant = if p.is_super_admin() {
            tenant_filter
        } else {
            Some(p.tenant.0)
        };
        macro_rules! filtered {
            () => {{
                let mut query = users::table.into_boxed();
                if let Some(t) = tenant {
                    query = query.filter(users::tenant_id.eq(Id(t)));
                }
                if let Some(r) = &role {
                    query = query.filter(users::role.eq(r.clone()));
                }
                if let Some(a) = is_active {
                    query = query.filter(users::is_active.eq(a));
                }
                if let Some(s) = &search {
                    query = query.filter(
                        users::email
                            .like(s.clone())
                            .escape('\\')
                            .or(lower(users::full_name).like(s.clone()).escape('\\')),
                    );
                }
                query
            }};
        }
        let (total, rows): (i64, Vec<UserRow>) = steward_store::count_and_page!(
            &self.db,
            filtered,
            (users::created_at.desc(), users::id.desc()),
            UserRow::as_select(),
            page
        )?;
        Ok(Page::new(
            rows.into_iter().map(UserView::from).collect(),
            total,
            page,
        ))
    }

    /// `GET /users/{id}`.
    pub async fn get_user(&self, p: &Principal, id: &str) -> Result<UserView> {
        p.authorize(Op::UsersManage)?;
        Ok(self.target(p, id).await?.row.into())
    }

    /// `PUT /users/{id}`: `full_name` and `is_active` (false = block, true = unblock).
    pub async fn update_user(&self, p: &Principal, id: &str, body: &Body) -> Result<UserView> {
        p.authorize(Op::UsersManage)?;
        let value = body.parse::<Value>()?;
        let mut f = Fields::root(&value);
        let full_name = f.optional_str("full_name", 0, 200).map(str::to_owned);
        let is_active = f.optional_bool("is_active");
        f.finish()?;
        let target = self.target(p, id).await?;
        if is_active == Some(false) {
            Self::not_self(p, &target, "block")?;
        }
        Self::not_higher(p, &target)?;
        match is_active {
            // A block or unblock is guarded (409/403 when the target or the actor changed
            // meanwhile); the new name is written in the same transaction, so a refused call
            // changes nothing.
            Some(active) if active != target.row.is_active => {
                self.set_active(p, &target, active, full_name.as_deref())
                    .await?;
            }
            _ => self.set_fields(target.row.id, full_name).await?,
        }
        self.reload(target.id).await
    }

    /// `POST /users/{id}/reset-password`.
    pub async fn reset_password(&self, p: &Principal, id: &str, body: &Body) -> Result<()> {
        p.authorize(Op::UsersManage)?;
        let value = body.parse::<Value>()?;
        let mut f = Fields::root(&value);
        let raw = f.required_str("new_password", 0, usize::MAX);
        let new = check_password(&mut f, "new_password", raw);
        f.finish()?;
        let target = self.target(p, id).await?;
        Self::not_higher(p, &target)?;
        if target.row.auth_provider.is_some() && target.row.password_hash.is_none() {
            return Err(Error::conflict(
                "single sign-on users have no local password to reset",
            ));
        }
        let Some(new) = new else {
            return Err(Error::internal_msg("validated password missing"));
        };
        let hash = hash_password_async(new).await?;
        // Every session of the user ends (the caller's own too, when it resets itself).
        self.replace_password(target.row.id, hash, None).await?;
        self.record(
            target.tenant,
            p.user,
            "user.password_reset",
            format!("user:{}", target.id),
            json!({}),
        )
        .await;
        Ok(())
    }

    /// `PUT /users/{id}/role`.
    pub async fn set_role(&self, p: &Principal, id: &str, body: &Body) -> Result<UserView> {
        p.authorize(Op::UsersManage)?;
        let value = body.parse::<Value>()?;
        let mut f = Fields::root(&value);
        let role = f
            .required_enum("role", &ROLE_NAMES)
            .and_then(|r| r.parse::<Role>().ok());
        f.finish()?;
        let Some(role) = role else {
            return Err(Error::internal_msg("validated role missing"));
        };
        let target = self.target(p, id).await?;
        Self::not_self(p, &target, "change the role of")?;
        Self::not_higher(p, &target)?;
        Self::assignable(p, role)?;
        self.apply_guarded(p, &target, Change::Role(role)).await?;
        self.credentials_changed().await;
        self.record(
            target.tenant,
            p.user,
            "user.role_changed",
            format!("user:{}", target.id),
            json!({"from": target.role.as_str(), "to": role.as_str()}),
        )
        .await;
        self.reload(target.id).await
    }

    /// `POST /users/{id}/block` and `/unblock` as requested: a body, which they do not read,
    /// checked ([`Body::unread`]) after the role and before anything changes.
    pub async fn set_blocked_request(
        &self,
        p: &Principal,
        id: &str,
        blocked: bool,
        body: &Body,
    ) -> Result<UserView> {
        p.authorize(Op::UsersManage)?;
        body.unread()?;
        self.set_blocked(p, id, blocked).await
    }

    /// `POST /users/{id}/block` and `/unblock` (idempotent).
    pub async fn set_blocked(&self, p: &Principal, id: &str, blocked: bool) -> Result<UserView> {
        p.authorize(Op::UsersManage)?;
        let target = self.target(p, id).await?;
        if blocked {
            Self::not_self(p, &target, "block")?;
        }
        Self::not_higher(p, &target)?;
        self.set_active(p, &target, !blocked, None).await?;
        self.reload(target.id).await
    }

    /// `DELETE /users/{id}`: permanent; the user's keys go with it, audit entries stay.
    pub async fn delete_user(&self, p: &Principal, id: &str) -> Result<()> {
        p.authorize(Op::UsersManage)?;
        let target = self.target(p, id).await?;
        Self::not_self(p, &target, "delete")?;
        Self::not_higher(p, &target)?;
        self.apply_guarded(p, &target, Change::Delete).await?;
        self.credentials_changed().await;
        self.record(
            target.tenant,
            p.user,
            "user.deleted",
            format!("user:{}", target.id),
            json!({"email": target.row.email}),
        )
        .await;
        Ok(())
    }

    // ------------------------------------------------------------------ helpers

    async fn reload(&self, id: UserId) -> Result<UserView> {
        self.user_row(id)
            .await?
            .map(UserView::from)
            .ok_or_else(|| Error::not_found(format!("user {id} was not found")))
    }

    async fn set_fields(&self, id: Id, full_name: Option<String>) -> Result<()> {
        let Some(name) = full_name else { return Ok(()) };
        let now = Ts(clock::now());
        with_conn!(&self.db, conn => {
            diesel::update(users::table.filter(users::id.eq(id)))
                .set((users::full_name.eq(name), users::updated_at.eq(now)))
                .execute(conn)
                .await
                .db()
        })?;
        Ok(())
    }

    /// Blocks or unblocks; audits and publishes only an actual change. `full_name`, when
    /// given, is written in the same guarded transaction.
    async fn set_active(
        &self,
        p: &Principal,
        target: &Target,
        active: bool,
        full_name: Option<&str>,
    ) -> Result<()> {
        if target.row.is_active == active {
            return Ok(());
        }
        // Conditional on the state read: of concurrent identical calls only one changes the
        // row, and only that one writes the audit entry (blocking a blocked user is a no-op).
        let changed = self
            .apply_guarded(p, target, Change::Active(active, full_name))
            .await?;
        if changed == 0 {
            return Ok(());
        }
        self.credentials_changed().await;
        let action = if active {
            "user.unblocked"
        } else {
            "user.blocked"
        };
        self.record(
            target.tenant,
            p.user,
            action,
            format!("user:{}", target.id),
            json!({}),
        )
        .await;
        Ok(())
    }
    /// Applies `change` to `target` in one transaction that first locks the acting user's row
    /// and the target's (in id order, so that two admins acting on each other cannot deadlock)
    /// and then reads both again: the actor must still be active with at least the role it
    /// authenticated with (403 otherwise), the target must still hold the role it was checked
    /// with (409 otherwise). So of two admins demoting, blocking or deleting each other at the
    /// same instant, one succeeds and the other is refused (the role of a request is read at
    /// authentication, before the other's change commits). Returns the rows changed: 0 when
    /// an activation found the target already in the wanted state.
    async fn apply_guarded(
        &self,
        p: &Principal,
        target: &Target,
        change: Change<'_>,
    ) -> Result<usize> {
        let target_id = target.row.id;
        let actor = p.user.map(|u| Id(u.0)).filter(|a| *a != target_id);
        let mut locks = vec![target_id];
        locks.extend(actor);
        locks.sort_by_key(|id| id.0);
        let (acting_role, target_role) = (p.role, target.role.as_str());
        let now = Ts(clock::now());
        let outcome = with_conn!(&self.db, conn => {
            conn.transaction::<_, diesel::result::Error, _>(|conn| {
                let locks = &locks;
                async move {
                    // A no-op update: the row lock (PostgreSQL) or the write lock (SQLite).
                    for id in locks {
                        diesel::update(users::table.filter(users::id.eq(*id)))
                            .set(users::updated_at.eq(users::updated_at))
                            .execute(conn)
                            .await?;
                    }
                    if let Some(actor) = actor {
                        let row: Option<(String, bool)> = users::table
                            .filter(users::id.eq(actor))
                            .select((users::role, users::is_active))
                            .first(conn)
                            .await
                            .optional()?;
                        let still = row.is_some_and(|(role, active)| {
                            active && role.parse::<Role>().is_ok_and(|r| r >= acting_role)
                        });
                        if !still {
                            return Ok(Guarded::ActorChanged);
                        }
                    }
                    let role: Option<String> = users::table
                        .filter(users::id.eq(target_id))
                        .select(users::role)
                        .first(conn)
                        .await
                        .optional()?;
                    if role.as_deref() != Some(target_role) {
                        return Ok(Guarded::TargetChanged);
                    }
                    let one = users::table.filter(users::id.eq(target_id));
                    let n = match change {
                        Change::Role(r) => {
                            diesel::update(one)
                                .set((users::role.eq(r.as_str()), users::updated_at.eq(now)))
                                .execute(conn)
                                .await?
                        }
                        Change::Active(active, full_name) => {
                            if let Some(name) = full_name {
                                diesel::update(users::table.filter(users::id.eq(target_id)))
                                    .set((users::full_name.eq(name), users::updated_at.eq(now)))
                                    .execute(conn)
                                    .await?;
                            }
                            diesel::update(one.filter(users::is_active.eq(!active)))
                                .set((users::is_active.eq(active), users::updated_at.eq(now)))
                                .execute(conn)
                                .await?
                        }
                        Change::Delete => diesel::delete(one).execute(conn).await?,
                    };
                    Ok(Guarded::Done(n))
                }
                .scope_boxed()
            })
            .await
            .db()
        })?;
        match outcome {
            Guarded::Done(n) => Ok(n),
            Guarded::ActorChanged => Err(Error::forbidden(
                "your account or role changed while this request ran; nothing was changed",
            )),
            Guarded::TargetChanged => Err(Error::conflict(format!(
                "user {} changed while this request ran; read it again",
                target.id
            ))),
        }
    }
}

/// What a management call changes on its target (`Identity::apply_guarded`).
#[derive(Clone, Copy)]
enum Change<'a> {
    Role(Role),
    /// Active or not, and a new `full_name` written with it.
    Active(bool, Option<&'a str>),
    Delete,
}

/// What `Identity::apply_guarded`'s transaction found.
enum Guarded {
    Done(usize),
    ActorChanged,
    TargetChanged,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn email_rules() {
        assert!(valid_email("ana@example.com"));
        for bad in [
            "not-an-email",
            "@example.com",
            "a@b",
            "a@@b.c",
            "a b@c.d",
            "a@.com",
            "a\u{0}b@corp.com",
            "u42@corp.com\nX-Injected: 1",
            "ana\u{200B}@example.com",
        ] {
            assert!(!valid_email(bad), "{bad}");
        }
    }

    #[test]
    fn like_patterns_are_escaped() {
        assert_eq!(escape_like("50%_off"), "%50\\%\\_off%");
    }

    use std::sync::Arc;

    use async_trait::async_trait;
    use steward_core::principal::CredentialKind;
    use steward_core::{AuditId, AuditRecord, AuditWriter, ErrorKind, MemoryBus};

    use crate::service::{IdentityConfig, NoProvisioning, PlatformCaller};

    struct NoAudit;

    #[async_trait]
    impl AuditWriter for NoAudit {
        async fn append(&self, _: AuditRecord) -> Result<AuditId> {
            Ok(AuditId::new())
        }
    }

    fn as_user(tenant: TenantId, user: &UserView, role: Role) -> Principal {
        Principal {
            tenant,
            role,
            user: Some(UserId(user.id.parse().unwrap())),
            key: None,
            kind: CredentialKind::Jwt,
            jti: None,
        }
    }

    // Two admins demoting each other at the same instant: each request's role was read at
    // authentication, before the other's change committed. The second change must find its
    // actor demoted and be refused, whatever it changes.
    /// An identity service on `db` with a tenant; the tenant's id and its tenant-key principal.
    async fn with_tenant(db: &steward_store::DbPool) -> (Identity, TenantId, Principal) {
        let config = IdentityConfig {
            secret_key: "k".repeat(32),
            token_minutes: 15,
            admin_api_key: "admin-key-for-tests".into(),
            sso_providers: vec![],
        };
        let identity = Identity::new(
            db.clone(),
            Arc::new(MemoryBus::new()),
            Arc::new(NoAudit),
            Arc::new(NoProvisioning),
            config,
        )
        .unwrap();
        let created = identity
            .create_tenant(
                &PlatformCaller::AdminKey,
                &Body::json(&json!({"name": "race"})),
            )
            .await
            .unwrap();
        let tenant = TenantId(created.id.parse().unwrap());
        let key = Principal {
            tenant,
            role: Role::Admin,
            user: None,
            key: None,
            kind: CredentialKind::TenantKey,
            jti: None,
        };
        (identity, tenant, key)
    }

    // A failed login is answered no sooner than the floor, whether the e-mail is known (an
    // audit entry is written) or not, so the answer's time does not tell them apart.
    steward_store::db_test!(failed_logins_take_the_floor, |db| {
        let (identity, _, key) = with_tenant(&db.pool).await;
        let body =
            json!({"email": "known@race.test", "password": "a-good-password", "role": "viewer"});
        identity
            .create_user(&key, &Body::json(&body))
            .await
            .unwrap();
        for email in ["known@race.test", "unknown@race.test"] {
            let started = std::time::Instant::now();
            let body = json!({"email": email, "password": "a-wrong-password"});
            let refused = identity.login(&Body::json(&body)).await.unwrap_err();
            assert_eq!(refused.kind, ErrorKind::InvalidCredentials, "{refused:?}");
            assert!(
                started.elapsed() >= crate::service::FAILED_LOGIN_FLOOR,
                "{email}: {:?}",
                started.elapsed()
            );
        }
        let body = json!({"email": "known@race.test", "password": "a-good-password"});
        identity.login(&Body::json(&body)).await.unwrap();
    });

    // A password changed ends the user's other sessions (tokens and session keys) and keeps
    // the caller's; a password reset by an admin ends them all (probe H-11).
    steward_store::db_test!(a_new_password_ends_the_old_sessions, |db| {
        let (identity, _, key) = with_tenant(&db.pool).await;
        let body = json!({"email": "s@race.test", "password": "a-good-password", "role": "viewer"});
        let user = identity
            .create_user(&key, &Body::json(&body))
            .await
            .unwrap();
        let login = |password: &'static str| {
            let identity = identity.clone();
            async move {
                let body = json!({"email": "s@race.test", "password": password});
                identity.login(&Body::json(&body)).await.unwrap()
            }
        };
        let (phone, laptop) = (
            login("a-good-password").await,
            login("a-good-password").await,
        );
        let me = identity
            .principal_from_jwt(&laptop.access_token)
            .await
            .unwrap();
        let change =
            json!({"current_password": "a-good-password", "new_password": "another-good-one"});
        identity
            .change_password(&me, &Body::json(&change))
            .await
            .unwrap();
        assert!(identity
            .principal_from_jwt(&laptop.access_token)
            .await
            .is_ok());
        let ended = identity
            .principal_from_jwt(&phone.access_token)
            .await
            .unwrap_err();
        assert_eq!(ended.kind, ErrorKind::InvalidCredentials, "{ended:?}");
        let phone_key = phone.api_key.clone();
        assert!(identity.principal_from_api_key(&phone_key).await.is_err());
        assert!(identity
            .principal_from_api_key(&laptop.api_key)
            .await
            .is_ok());
        // A reset by an admin ends every session.
        let reset = json!({"new_password": "a-third-good-one"});
        identity
            .reset_password(&key, &user.id, &Body::json(&reset))
            .await
            .unwrap();
        assert!(identity
            .principal_from_jwt(&laptop.access_token)
            .await
            .is_err());
        assert!(identity
            .principal_from_api_key(&laptop.api_key)
            .await
            .is_err());
        let fresh = login("a-third-good-one").await;
        assert!(identity
            .principal_from_jwt(&fresh.access_token)
            .await
            .is_ok());
        // A wrong current password and a short new one are both named.
        let me = identity
            .principal_from_jwt(&fresh.access_token)
            .await
            .unwrap();
        let bad = json!({"current_password": "not-it-at-all", "new_password": "x"});
        let e = identity
            .change_password(&me, &Body::json(&bad))
            .await
            .unwrap_err();
        let fields: Vec<&str> = e.errors.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["new_password", "current_password"], "{e:?}");
    });

    // A session opens only for the user as read at login (probe L): a login whose password
    // check ran before a reset, a block or a deletion committed gets no session (401, never a
    // 500 from the foreign key), and a deleted user's token creates no key.
    steward_store::db_test!(a_login_racing_a_change_gets_no_session, |db| {
        let (identity, tenant, key) = with_tenant(&db.pool).await;
        let mut users = vec![];
        for name in ["reset", "blocked", "deleted"] {
            let body = json!({"email": format!("{name}@race.test"), "password": "a-good-password", "role": "viewer"});
            let user = identity
                .create_user(&key, &Body::json(&body))
                .await
                .unwrap();
            let id = UserId(user.id.parse().unwrap());
            let row = identity.user_row(id).await.unwrap().unwrap();
            users.push((user, row));
        }
        // Each login read its row, then the change committed.
        let reset = json!({"new_password": "another-good-one"});
        identity
            .reset_password(&key, &users[0].0.id, &Body::json(&reset))
            .await
            .unwrap();
        identity
            .set_blocked(&key, &users[1].0.id, true)
            .await
            .unwrap();
        let deleted = as_user(tenant, &users[2].0, Role::Viewer);
        identity.delete_user(&key, &users[2].0.id).await.unwrap();
        for (user, row) in &users {
            let refused = identity.open_session(row).await.unwrap_err();
            assert_eq!(
                refused.kind,
                ErrorKind::InvalidCredentials,
                "{}: {refused:?}",
                user.email
            );
        }
        let no_key = identity
            .create_api_key(&deleted, &Body::json(&json!({"name": "late"})))
            .await
            .unwrap_err();
        assert_eq!(no_key.kind, ErrorKind::InvalidCredentials, "{no_key:?}");
        // The row as it is now opens a session.
        let id = UserId(users[0].0.id.parse().unwrap());
        let fresh = identity.user_row(id).await.unwrap().unwrap();
        identity.open_session(&fresh).await.unwrap();
    });

    // Every login writes a session key; once expired it is useless and is purged (probe M:
    // they accumulated for ever). Personal keys never expire and stay.
    steward_store::db_test!(expired_session_keys_are_purged, |db| {
        use steward_store::schema::api_keys;
        let (identity, _, key) = with_tenant(&db.pool).await;
        let body = json!({"email": "p@race.test", "password": "a-good-password", "role": "viewer"});
        identity
            .create_user(&key, &Body::json(&body))
            .await
            .unwrap();
        let body = json!({"email": "p@race.test", "password": "a-good-password"});
        let (old, current) = (
            identity.login(&Body::json(&body)).await.unwrap(),
            identity.login(&Body::json(&body)).await.unwrap(),
        );
        let me = identity
            .principal_from_jwt(&current.access_token)
            .await
            .unwrap();
        identity
            .create_api_key(&me, &Body::json(&json!({"name": "mine"})))
            .await
            .unwrap();
        let old_jti = identity
            .principal_from_jwt(&old.access_token)
            .await
            .unwrap()
            .jti
            .unwrap();
        let past = Ts(clock::now() - time::Duration::seconds(1));
        let pool = &db.pool;
        let r: Result<usize> = async {
            with_conn!(pool, conn => diesel::update(api_keys::table.filter(api_keys::jti.eq(Some(old_jti))))
                .set(api_keys::expires_at.eq(Some(past)))
                .execute(conn)
                .await
                .db())
        }
        .await;
        assert_eq!(r.unwrap(), 1);
        assert!(identity.purge_expired_credentials().await.unwrap() >= 1);
        let left: Result<Vec<String>> = async {
            with_conn!(pool, conn => api_keys::table.select(api_keys::kind).load(conn).await.db())
        }
        .await;
        let mut left = left.unwrap();
        left.sort();
        assert_eq!(
            left,
            ["personal", "session", "tenant"],
            "the current session, the personal key and the tenant key stay"
        );
        assert!(identity
            .principal_from_api_key(&current.api_key)
            .await
            .is_ok());
    });

    // Contract 8: a local user has no `external_subject`; an admin's `tenant_id` is ignored,
    // malformed or not (probe H-6, H-7).
    steward_store::db_test!(an_admins_create_ignores_what_it_cannot_set, |db| {
        let (identity, tenant, key) = with_tenant(&db.pool).await;
        let body = json!({"email": "local@race.test", "password": "a-good-password",
                          "external_subject": "sub-2", "tenant_id": "garbage"});
        let user = identity
            .create_user(&key, &Body::json(&body))
            .await
            .unwrap();
        assert_eq!(user.external_subject, None);
        assert_eq!(user.auth_provider, None);
        assert_eq!(user.tenant_id, tenant.to_string());
    });

    steward_store::db_test!(a_demoted_actor_changes_nothing, |db| {
        let (identity, tenant, key) = with_tenant(&db.pool).await;
        let mut admins = vec![];
        for name in ["a", "b"] {
            let body = json!({"email": format!("{name}@race.test"), "password": "a-good-password", "role": "admin"});
            admins.push(
                identity
                    .create_user(&key, &Body::json(&body))
                    .await
                    .unwrap(),
            );
        }
        let (a, b) = (&admins[0], &admins[1]);
        let stale_a = as_user(tenant, a, Role::Admin);
        let viewer = Body::json(&json!({"role": "viewer"}));
        identity
            .set_role(&as_user(tenant, b, Role::Admin), &a.id, &viewer)
            .await
            .unwrap();
        let refused = identity
            .set_role(&stale_a, &b.id, &viewer)
            .await
            .unwrap_err();
        assert_eq!(refused.kind, ErrorKind::Forbidden, "{refused:?}");
        let refused = identity
            .set_blocked(&stale_a, &b.id, true)
            .await
            .unwrap_err();
        assert_eq!(refused.kind, ErrorKind::Forbidden, "{refused:?}");
        let refused = identity.delete_user(&stale_a, &b.id).await.unwrap_err();
        assert_eq!(refused.kind, ErrorKind::Forbidden, "{refused:?}");
        let b_now = identity
            .reload(UserId(b.id.parse().unwrap()))
            .await
            .unwrap();
        assert_eq!((b_now.role.as_str(), b_now.is_active), ("admin", true));
        // The admin still in office acts as before.
        let b_admin = as_user(tenant, b, Role::Admin);
        identity.set_blocked(&b_admin, &a.id, true).await.unwrap();
        identity.delete_user(&b_admin, &a.id).await.unwrap();
    });
}
