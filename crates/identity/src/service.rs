//! The identity service: credentials → `Principal`, login and logout, and the shared plumbing
//! (audit trail and events) of the user, key and tenant operations.

use std::sync::Arc;

use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};
use scoped_futures::ScopedFutureExt;
use serde_json::{json, Value};
use steward_core::event::{publish, Event, Severity};
use steward_core::principal::CredentialKind;
use steward_core::validate::Fields;
use steward_core::{
    clock, AuditRecord, AuditWriter, Body, Error, ErrorKind, EventBus, Principal, Result, Role,
    TenantId, UserId,
};
use steward_store::schema::{api_keys, revoked_tokens, users};
use steward_store::{with_conn, DbPool, DbResultExt, Id, Ts};
use time::OffsetDateTime;

use crate::keys::{hash_key, secrets_equal, well_formed, RawKey};
use crate::password::{hash_password, verify_password_async};
use crate::resolved::{Resolved, ResolvedKeys, CREDENTIAL_CHANGES_CHANNEL};
use crate::rows::{ApiKeyRow, UserRow};
use crate::tokens::{Claims, TokenKeys};
use crate::views::{LoginResponse, LoginUser};

/// Called after a tenant is created (the policy crate installs the default policies).
#[async_trait]
pub trait TenantProvisioner: Send + Sync + 'static {
    async fn provision(&self, tenant: TenantId) -> Result<()>;
}

/// Does nothing (until a domain registers a real provisioner).
pub struct NoProvisioning;

#[async_trait]
impl TenantProvisioner for NoProvisioning {
    async fn provision(&self, _: TenantId) -> Result<()> {
        Ok(())
    }
}

/// Settings of the identity service.
#[derive(Clone, Debug)]
pub struct IdentityConfig {
    pub secret_key: String,
    pub token_minutes: u64,
    pub admin_api_key: String,
    /// Ids of the configured SSO providers (for pre-provisioned SSO users).
    pub sso_providers: Vec<String>,
}

/// The caller of a platform operation (tenants, SIEM).
#[derive(Clone, Debug)]
pub enum PlatformCaller {
    /// `X-Admin-Key`.
    AdminKey,
    /// A JWT; allowed only for super admins.
    User(Principal),
}

impl PlatformCaller {
    pub fn authorize(&self) -> Result<()> {
        match self {
            PlatformCaller::AdminKey => Ok(()),
            PlatformCaller::User(p) => p.authorize(steward_core::Op::PlatformManage),
        }
    }
}

/// The identity service.
#[derive(Clone)]
pub struct Identity {
    pub(crate) db: DbPool,
    pub(crate) bus: Arc<dyn EventBus>,
    pub(crate) audit: Arc<dyn AuditWriter>,
    pub(crate) provisioner: Arc<dyn TenantProvisioner>,
    pub(crate) keys: TokenKeys,
    pub(crate) config: IdentityConfig,
    /// A hash verified when the e-mail is unknown, so that both answers take as long.
    dummy_hash: Arc<String>,
    /// API keys resolved recently (see `resolved`).
    resolved: Arc<ResolvedKeys>,
}

/// The least time before a failed password login is answered: above the password check and
/// the audit entry of a known e-mail (tens of milliseconds), so that the answer's time does
/// not tell whether the e-mail has an account. It also slows password guessing a little.
pub(crate) const FAILED_LOGIN_FLOOR: std::time::Duration = std::time::Duration::from_millis(250);

/// Last-use times are written at most this often per key.
const LAST_USED_RESOLUTION: time::Duration = time::Duration::seconds(60);

pub(crate) fn uuid_of(id: Id) -> String {
    id.0.hyphenated().to_string()
}

pub(crate) fn role_of(row_role: &str) -> Result<Role> {
    row_role
        .parse()
        .map_err(|_| Error::internal_msg(format!("stored role {row_role:?} is unknown")))
}

impl Identity {
    pub fn new(
        db: DbPool,
        bus: Arc<dyn EventBus>,
        audit: Arc<dyn AuditWriter>,
        provisioner: Arc<dyn TenantProvisioner>,
        config: IdentityConfig,
    ) -> Result<Identity> {
        let keys = TokenKeys::new(&config.secret_key, (config.token_minutes * 60) as i64);
        let dummy_hash = Arc::new(hash_password(&RawKey::generate().masked())?);
        Ok(Identity {
            db,
            bus,
            audit,
            provisioner,
            keys,
            config,
            dummy_hash,
            resolved: Arc::default(),
        })
    }

    /// A credential changed (key revoked, session ended, user blocked, re-roled or deleted):
    /// forgets this instance's resolved keys before the change is answered, and tells the
    /// other instances to do the same.
    pub(crate) async fn credentials_changed(&self) {
        self.resolved.clear();
        let origin = steward_store::schedule::instance_id();
        if let Err(e) = self
            .bus
            .publish(CREDENTIAL_CHANGES_CHANNEL, origin.as_bytes())
            .await
        {
            tracing::warn!(error = %e, "credential change notice not published; other instances forget resolved keys within their TTL");
        }
    }

    /// Forgets resolved keys on other instances' credential change notices; runs until the
    /// task is aborted. Spawn it once per instance.
    pub async fn listen_for_changes(self) {
        steward_core::bus::follow(
            self.bus.clone(),
            CREDENTIAL_CHANGES_CHANNEL,
            |_| self.resolved.clear(),
            || self.resolved.clear(),
        )
        .await
    }

    /// Writes the audit entry of an identity operation and publishes it as an event.
    /// A failure to audit is logged, never hidden from the operator, but does not undo the
    /// operation that already happened.
    pub(crate) async fn record(
        &self,
        tenant: TenantId,
        user_id: Option<UserId>,
        action: &str,
        resource: String,
        input: Value,
    ) {
        let entry = AuditRecord::system(tenant, user_id, action, resource.clone())
            .with_input(input.clone());
        if let Err(e) = self.audit.append(entry).await {
            tracing::error!(error = %e, action, resource = %resource, "audit entry not written");
        }
        let severity = if action == "user.login_failed" {
            Severity::Warning
        } else {
            Severity::Info
        };
        // The id of the object acted on, by name, for SIEM receivers (contract 22): a key's
        // `key_id`, the `target_user_id` of an action on a user (`user_id` is the actor).
        let mut data = json!({"user_id": user_id.map(|u| u.to_string()), "resource": resource, "details": input});
        if let Some(id) = resource.strip_prefix("api_key:") {
            data["key_id"] = json!(id);
        } else if let Some(id) = resource.strip_prefix("user:") {
            data["target_user_id"] = json!(id);
        }
        publish(&self.bus, Event::new(action, tenant, severity, data));
    }

    // ---------------------------------------------------------------- credentials

    /// Resolves an `X-API-Key` (tenant key or user key).
    pub async fn principal_from_api_key(&self, raw: &str) -> Result<Principal> {
        let invalid = || Error::invalid_credentials("the API key is invalid or revoked");
        if !well_formed(raw) {
            return Err(invalid());
        }
        let hash = hash_key(raw);
        let now = clock::now();
        if let Some(hit) = self.resolved.get(&hash, now) {
            if hit
                .last_used_at
                .is_none_or(|t| now - t > LAST_USED_RESOLUTION)
            {
                self.resolved.used(&hash, now);
                self.touch_key(hit.key_id, now);
            }
            return Ok(hit.principal);
        }
        type KeyJoin = (ApiKeyRow, Option<String>, Option<bool>, Option<Id>);
        let found: Option<KeyJoin> = with_conn!(&self.db, conn => {
            api_keys::table
                .left_join(users::table.on(users::id.nullable().eq(api_keys::user_id)))
                .filter(api_keys::key_hash.eq(&hash))
                .select((
                    ApiKeyRow::as_select(),
                    users::role.nullable(),
                    users::is_active.nullable(),
                    users::tenant_id.nullable(),
                ))
                .first(conn)
                .await
                .optional()
                .db()
        })?;
        let Some((key, user_role, user_active, user_tenant)) = found else {
            return Err(invalid());
        };
        if key.revoked_at.is_some() || key.expires_at.is_some_and(|e| e.0 <= now) {
            return Err(invalid());
        }
        // Secrets compared in constant time even though the lookup was by hash.
        if !secrets_equal(&key.key_hash, &hash) {
            return Err(invalid());
        }
        let principal = match (key.kind.as_str(), key.user_id) {
            ("tenant", None) => Principal {
                tenant: key.tenant_id.into_id(),
                role: Role::Admin,
                user: None,
                key: Some(key.id.into_id()),
                kind: CredentialKind::TenantKey,
                jti: None,
            },
            (_, Some(user_id)) => {
                let (Some(role), Some(active), Some(tenant)) =
                    (user_role, user_active, user_tenant)
                else {
                    return Err(invalid());
                };
                if !active {
                    return Err(Error::new(ErrorKind::UserBlocked, "the user is blocked"));
                }
                Principal {
                    tenant: tenant.into_id(),
                    role: role_of(&role)?,
                    user: Some(user_id.into_id()),
                    key: Some(key.id.into_id()),
                    kind: CredentialKind::UserKey,
                    jti: key.jti.clone(),
                }
            }
            _ => return Err(invalid()),
        };
        let mut last_used = key.last_used_at.map(|t| t.0);
        if last_used.is_none_or(|t| now - t > LAST_USED_RESOLUTION) {
            self.touch_key(key.id, now);
            last_used = Some(now);
        }
        self.resolved.insert(
            hash,
            Resolved::new(
                principal.clone(),
                key.id,
                key.expires_at.map(|e| e.0),
                last_used,
            ),
        );
        Ok(principal)
    }

    fn touch_key(&self, id: Id, now: OffsetDateTime) {
        let db = self.db.clone();
        tokio::spawn(async move {
            let result: Result<usize> = async {
                with_conn!(&db, conn => {
                    diesel::update(api_keys::table.filter(api_keys::id.eq(id)))
                        .set(api_keys::last_used_at.eq(Some(Ts(now))))
                        .execute(conn)
                        .await
                        .db()
                })
            }
            .await;
            if let Err(e) = result {
                tracing::debug!(error = %e, "last_used_at not updated");
            }
        });
    }

    /// Resolves an `Authorization: Bearer` token. Role and tenant come from storage.
    pub async fn principal_from_jwt(&self, token: &str) -> Result<Principal> {
        let now = clock::now();
        let claims = self.keys.verify(token, now.unix_timestamp())?;
        let invalid = || Error::invalid_credentials("the access token is invalid or revoked");
        let user_id: uuid::Uuid = claims.sub.parse().map_err(|_| invalid())?;
        let jti = claims.jti.clone();
        let found: Option<(UserRow, bool)> = with_conn!(&self.db, conn => {
            users::table
                .filter(users::id.eq(Id(user_id)))
                .select((
                    UserRow::as_select(),
                    diesel::dsl::exists(revoked_tokens::table.filter(revoked_tokens::jti.eq(&jti))),
                ))
                .first(conn)
                .await
                .optional()
                .db()
        })?;
        let Some((user, revoked)) = found else {
            return Err(invalid());
        };
        if revoked {
            return Err(invalid());
        }
        if !user.is_active {
            return Err(Error::new(ErrorKind::UserBlocked, "the user is blocked"));
        }
        Ok(Principal {
            tenant: user.tenant_id.into_id(),
            role: role_of(&user.role)?,
            user: Some(user.id.into_id()),
            key: None,
            kind: CredentialKind::Jwt,
            jti: Some(claims.jti),
        })
    }

    /// Checks `X-Admin-Key` in constant time.
    pub fn check_admin_key(&self, presented: &str) -> Result<PlatformCaller> {
        if secrets_equal(presented, &self.config.admin_api_key) {
            Ok(PlatformCaller::AdminKey)
        } else {
            Err(Error::invalid_credentials("the admin key is wrong"))
        }
    }

    // ---------------------------------------------------------------- login / logout

    /// `POST /auth/login`.
    pub async fn login(&self, body: &Body) -> Result<LoginResponse> {
        let value = body.parse::<Value>()?;
        let mut f = Fields::root(&value);
        let email = f
            .required_str("email", 1, 320)
            .map(|e| e.trim().to_lowercase());
        let password = f.required_str("password", 1, 1024).map(str::to_owned);
        f.finish()?;
        let (Some(email), Some(password)) = (email, password) else {
            return Err(Error::internal_msg("validated login fields missing"));
        };
        let invalid = || Error::invalid_credentials("the e-mail or password is wrong");
        // Every refusal below is answered no sooner than `FAILED_LOGIN_FLOOR` after this, so
        // that the audit entry written for a known e-mail does not tell it from an unknown one.
        let floor = tokio::time::Instant::now() + FAILED_LOGIN_FLOOR;

        let user: Option<UserRow> = with_conn!(&self.db, conn => {
            users::table
                .filter(users::email.eq(&email))
                .select(UserRow::as_select())
                .first(conn)
                .await
                .optional()
                .db()
        })?;
        let Some(user) = user else {
            // Same work as a real check, so that unknown e-mails cannot be told apart by time.
            let _ = verify_password_async(self.dummy_hash.to_string(), password).await;
            // No tenant, so no audit chain: the attempt is still an event for SIEM export,
            // under the nil tenant (no WebSocket client belongs to it).
            publish(
                &self.bus,
                Event::new(
                    "user.login_failed",
                    TenantId(uuid::Uuid::nil()),
                    Severity::Warning,
                    json!({"email": email, "reason": "unknown user"}),
                ),
            );
            tokio::time::sleep_until(floor).await;
            return Err(invalid());
        };
        let Some(stored) = user.password_hash.clone() else {
            let _ = verify_password_async(self.dummy_hash.to_string(), password).await;
            tokio::time::sleep_until(floor).await;
            return Err(invalid());
        };
        let user_id: UserId = user.id.into_id();
        let tenant: TenantId = user.tenant_id.into_id();
        if !verify_password_async(stored, password).await? {
            self.record(
                tenant,
                Some(user_id),
                "user.login_failed",
                format!("user:{user_id}"),
                json!({"reason": "wrong password", "email": email}),
            )
            .await;
            tokio::time::sleep_until(floor).await;
            return Err(invalid());
        }
        if !user.is_active {
            return Err(Error::new(ErrorKind::UserBlocked, "the user is blocked"));
        }
        let response = self.open_session(&user).await?;
        self.record(
            tenant,
            Some(user_id),
            "user.login",
            format!("user:{user_id}"),
            json!({"method": "password"}),
        )
        .await;
        Ok(response)
    }

    /// Issues a token and a session key for a user (login and SSO exchange).
    pub async fn open_session(&self, user: &UserRow) -> Result<LoginResponse> {
        let now = clock::now();
        let exp = now + time::Duration::seconds(self.keys.lifetime_seconds);
        let jti = uuid::Uuid::new_v4().simple().to_string();
        let claims = Claims {
            sub: uuid_of(user.id),
            tenant_id: uuid_of(user.tenant_id),
            role: user.role.clone(),
            jti: jti.clone(),
            iat: now.unix_timestamp(),
            exp: now.unix_timestamp() + self.keys.lifetime_seconds,
        };
        let token = self.keys.issue(&claims)?;
        let key = RawKey::generate();
        let row = ApiKeyRow {
            id: Id(uuid::Uuid::now_v7()),
            tenant_id: user.tenant_id,
            user_id: Some(user.id),
            kind: "session".into(),
            name: Some("session".into()),
            key_hash: key.hash(),
            masked: key.masked(),
            jti: Some(jti),
            created_at: Ts(now),
            expires_at: Some(Ts(exp)),
            revoked_at: None,
            last_used_at: None,
        };
        // The session opens only while the user is as read (same password, same role, still
        // active and present): a login racing a password reset, a role change, a block or a
        // deletion is refused, never left holding a session the change meant to end.
        let opened = self
            .insert_key_if(
                &row,
                UserState::AsRead {
                    role: &user.role,
                    hash: user.password_hash.as_deref(),
                    login_at: Ts(now),
                },
            )
            .await?;
        if !opened {
            return Err(Error::invalid_credentials(
                "the account changed while signing in; sign in again",
            ));
        }
        Ok(LoginResponse {
            access_token: token,
            token_type: "bearer",
            expires_in: self.keys.lifetime_seconds,
            user: LoginUser {
                id: uuid_of(user.id),
                email: user.email.clone(),
                role: user.role.clone(),
                tenant_id: uuid_of(user.tenant_id),
                full_name: user.full_name.clone(),
            },
            api_key: key.expose().to_owned(),
        })
    }

    /// `POST /auth/logout` as requested: the optional body checked ([`Body::unread`]) once the
    /// credential is a session's (401 first, contract 3.2), before anything is revoked.
    pub async fn logout_request(&self, p: &Principal, body: &Body) -> Result<()> {
        if p.jti.is_some() && p.user.is_some() {
            body.unread()?;
        }
        self.logout(p).await
    }

    /// `POST /auth/logout`: revokes the token's `jti` and the session key made with it.
    pub async fn logout(&self, p: &Principal) -> Result<()> {
        let (Some(jti), Some(user)) = (p.jti.clone(), p.user) else {
            return Err(Error::missing_credentials(
                "logout needs the access token of a session",
            ));
        };
        let now = clock::now();
        let expires = Ts(now + time::Duration::seconds(self.keys.lifetime_seconds));
        let revoked = with_conn!(&self.db, conn => {
            let revoked = diesel::insert_into(revoked_tokens::table)
                .values((revoked_tokens::jti.eq(&jti), revoked_tokens::expires_at.eq(expires)))
                .on_conflict_do_nothing()
                .execute(conn)
                .await
                .db()?;
            diesel::update(
                api_keys::table
                    .filter(api_keys::jti.eq(&jti))
                    .filter(api_keys::revoked_at.is_null()),
            )
            .set(api_keys::revoked_at.eq(Some(Ts(now))))
            .execute(conn)
            .await
            .db()?;
            Ok::<_, Error>(revoked)
        })?;
        self.credentials_changed().await;
        // Concurrent logouts of one token all succeed; the one that revoked it records it.
        if revoked == 0 {
            return Ok(());
        }
        self.record(
            p.tenant,
            Some(user),
            "user.logout",
            format!("user:{user}"),
            json!({}),
        )
        .await;
        Ok(())
    }

    /// Inserts `row`, a key of its user, in one transaction that first updates the user's row
    /// (its lock) where the user is in `state`: `false`, and nothing inserted, when the user
    /// changed or is gone, so no key outlives the change meant to end it and no key of a
    /// deleted user meets the foreign key as a 500.
    pub(crate) async fn insert_key_if(
        &self,
        row: &ApiKeyRow,
        state: UserState<'_>,
    ) -> Result<bool> {
        let Some(user) = row.user_id else {
            return Err(Error::internal_msg("a user's key without its user"));
        };
        with_conn!(&self.db, conn => {
            conn.transaction::<_, diesel::result::Error, _>(|conn| {
                async move {
                    let one = users::table.filter(users::id.eq(user));
                    let n = match state {
                        UserState::Present => {
                            diesel::update(one)
                                .set(users::updated_at.eq(users::updated_at))
                                .execute(conn)
                                .await?
                        }
                        UserState::AsRead { role, hash, login_at } => {
                            let still = one
                                .filter(users::is_active.eq(true))
                                .filter(users::role.eq(role));
                            let stamp = users::last_login_at.eq(Some(login_at));
                            match hash {
                                Some(h) => {
                                    diesel::update(still.filter(users::password_hash.eq(h)))
                                        .set(stamp)
                                        .execute(conn)
                                        .await?
                                }
                                None => {
                                    diesel::update(still.filter(users::password_hash.is_null()))
                                        .set(stamp)
                                        .execute(conn)
                                        .await?
                                }
                            }
                        }
                    };
                    if n == 0 {
                        return Ok(false);
                    }
                    diesel::insert_into(api_keys::table).values(row).execute(conn).await?;
                    Ok(true)
                }
                .scope_boxed()
            })
            .await
            .db()
        })
    }

    /// Sets a user's password hash and ends the user's sessions, in one transaction: every
    /// unrevoked session (an access token and its session key, both named by the token's
    /// `jti`) but `keep`, the caller's own, so that whoever held the old password is signed
    /// out everywhere. The password is written first, which takes the write lock (SQLite) or
    /// the user's row lock (PostgreSQL) at once: a login racing the change either sees the
    /// new hash or opened its session before, and that session is ended here.
    pub(crate) async fn replace_password(
        &self,
        user: Id,
        hash: String,
        keep: Option<&str>,
    ) -> Result<usize> {
        let now = clock::now();
        let expires = Ts(now + time::Duration::seconds(self.keys.lifetime_seconds));
        let keep = keep.map(str::to_owned);
        let ended = with_conn!(&self.db, conn => {
            conn.transaction::<_, diesel::result::Error, _>(|conn| {
                let keep = &keep;
                async move {
                    diesel::update(users::table.filter(users::id.eq(user)))
                        .set((users::password_hash.eq(Some(hash)), users::updated_at.eq(Ts(now))))
                        .execute(conn)
                        .await?;
                    let jtis: Vec<Option<String>> = api_keys::table
                        .filter(api_keys::user_id.eq(Some(user)))
                        .filter(api_keys::kind.eq("session"))
                        .filter(api_keys::revoked_at.is_null())
                        .select(api_keys::jti)
                        .load(conn)
                        .await?;
                    let jtis: Vec<String> = jtis
                        .into_iter()
                        .flatten()
                        .filter(|j| Some(j) != keep.as_ref())
                        .collect();
                    for jti in &jtis {
                        diesel::insert_into(revoked_tokens::table)
                            .values((
                                revoked_tokens::jti.eq(jti),
                                revoked_tokens::expires_at.eq(expires),
                            ))
                            .on_conflict_do_nothing()
                            .execute(conn)
                            .await?;
                    }
                    diesel::update(
                        api_keys::table
                            .filter(api_keys::user_id.eq(Some(user)))
                            .filter(api_keys::jti.eq_any(jtis.clone()))
                            .filter(api_keys::revoked_at.is_null()),
                    )
                    .set(api_keys::revoked_at.eq(Some(Ts(now))))
                    .execute(conn)
                    .await?;
                    Ok(jtis.len())
                }
                .scope_boxed()
            })
            .await
            .db()
        })?;
        if ended > 0 {
            self.credentials_changed().await;
        }
        Ok(ended)
    }

    /// Housekeeping: removes revocations of tokens that have expired anyway, and the session
    /// keys of logins that have (every login writes one; personal keys never expire). Answers
    /// how many rows went.
    pub async fn purge_expired_credentials(&self) -> Result<usize> {
        let now = Ts(clock::now());
        with_conn!(&self.db, conn => {
            let revocations =
                diesel::delete(revoked_tokens::table.filter(revoked_tokens::expires_at.lt(now)))
                    .execute(conn)
                    .await
                    .db()?;
            let sessions = diesel::delete(
                api_keys::table
                    .filter(api_keys::kind.eq("session"))
                    .filter(api_keys::expires_at.lt(Some(now))),
            )
            .execute(conn)
            .await
            .db()?;
            Ok::<_, Error>(revocations + sessions)
        })
    }
}

/// What `Identity::insert_key_if` requires of the key's user.
pub(crate) enum UserState<'a> {
    /// The user exists (a personal key).
    Present,
    /// The user is as read at login: active, with this role and password hash; the login's
    /// time is stamped on the row.
    AsRead {
        role: &'a str,
        hash: Option<&'a str>,
        login_at: Ts,
    },
}
