//! Personal API keys (contract 9).

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use serde_json::{json, Value};
use steward_core::page::MAX_LIMIT;
use steward_core::principal::CredentialKind;
use steward_core::validate::{Fields, Query};
use steward_core::{
    clock, parse_path_id, ApiKeyId, Body, Error, Page, PageRequest, Principal, Result, UserId,
};
use steward_store::schema::api_keys;
use steward_store::{with_conn, DbResultExt, Id, Ts};

use crate::keys::RawKey;
use crate::rows::ApiKeyRow;
use crate::service::{Identity, UserState};
use crate::views::ApiKeyView;

const DEFAULT_NAME: &str = "api-key";

fn user_of(p: &Principal) -> Result<UserId> {
    match (p.kind, p.user) {
        (CredentialKind::Jwt, Some(u)) => Ok(u),
        _ => Err(Error::missing_credentials(
            "API keys are managed with an access token",
        )),
    }
}

impl Identity {
    /// `POST /api-keys`: the raw key is in this response only.
    pub async fn create_api_key(&self, p: &Principal, body: &Body) -> Result<ApiKeyView> {
        let user = user_of(p)?;
        let value = body.parse_or_empty::<Value>()?;
        let mut f = Fields::root(&value);
        let name = f.optional_str("name", 1, 100);
        let name = f
            .name("name", name)
            .unwrap_or_else(|| DEFAULT_NAME.to_owned());
        f.finish()?;
        let key = RawKey::generate();
        let row = ApiKeyRow {
            id: Id(uuid::Uuid::now_v7()),
            tenant_id: Id(p.tenant.0),
            user_id: Some(Id(user.0)),
            kind: "personal".into(),
            name: Some(name),
            key_hash: key.hash(),
            masked: key.masked(),
            jti: None,
            created_at: Ts(clock::now()),
            expires_at: None,
            revoked_at: None,
            last_used_at: None,
        };
        let created = self.insert_key_if(&row, UserState::Present).await?;
        if !created {
            return Err(Error::invalid_credentials(
                "the user of this credential no longer exists",
            ));
        }
        let view = ApiKeyView::from_row(row, Some(key.expose().to_owned()));
        self.record(
            p.tenant,
            Some(user),
            "api_key.created",
            format!("api_key:{}", view.id),
            json!({"name": view.name, "masked_key": view.masked_key}),
        )
        .await;
        Ok(view)
    }

    /// `GET /api-keys`: the caller's unrevoked personal keys, masked.
    pub async fn list_api_keys(
        &self,
        p: &Principal,
        pairs: &[(String, String)],
    ) -> Result<Page<ApiKeyView>> {
        let user = user_of(p)?;
        let mut q = Query::new(pairs);
        let page = PageRequest::from_query(&mut q, MAX_LIMIT)?;
        let owner = Id(user.0);
        macro_rules! mine {
            () => {
                api_keys::table
                    .filter(api_keys::user_id.eq(owner))
                    .filter(api_keys::kind.eq("personal"))
                    .filter(api_keys::revoked_at.is_null())
            };
        }
        let (total, rows): (i64, Vec<ApiKeyRow>) = steward_store::count_and_page!(
            &self.db,
            mine,
            (api_keys::created_at.desc(), api_keys::id.desc()),
            ApiKeyRow::as_select(),
            page
        )?;
        let items = rows
            .into_iter()
            .map(|r| ApiKeyView::from_row(r, None))
            .collect();
        Ok(Page::new(items, total, page))
    }

    /// `DELETE /api-keys/{id}`: only the caller's own unrevoked personal keys.
    pub async fn revoke_api_key(&self, p: &Principal, id: &str) -> Result<()> {
        let user = user_of(p)?;
        let key_id: ApiKeyId = parse_path_id(id, "API key")?;
        let now = Ts(clock::now());
        let changed = with_conn!(&self.db, conn => {
            diesel::update(
                api_keys::table
                    .filter(api_keys::id.eq(Id(key_id.0)))
                    .filter(api_keys::user_id.eq(Id(user.0)))
                    .filter(api_keys::kind.eq("personal"))
                    .filter(api_keys::revoked_at.is_null()),
            )
            .set(api_keys::revoked_at.eq(Some(now)))
            .execute(conn)
            .await
            .db()
        })?;
        if changed == 0 {
            return Err(Error::not_found(format!("API key {key_id} was not found")));
        }
        self.credentials_changed().await;
        self.record(
            p.tenant,
            Some(user),
            "api_key.revoked",
            format!("api_key:{key_id}"),
            json!({}),
        )
        .await;
        Ok(())
    }
}
