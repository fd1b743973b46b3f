//! Tenant provisioning (contract 10).

use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};
use scoped_futures::ScopedFutureExt;
use serde_json::{json, Value};
use steward_core::event::{publish, Event, Severity};
use steward_core::page::MAX_LIMIT;
use steward_core::validate::{Fields, Query};
use steward_core::{clock, Body, Error, ErrorKind, Page, PageRequest, Result, TenantId};
use steward_store::schema::{api_keys, tenants};
use steward_store::{with_conn, DbResultExt, Id, Json, Ts};

use crate::keys::RawKey;
use crate::rows::{ApiKeyRow, TenantRow};
use crate::service::{Identity, PlatformCaller};
use crate::views::{CreatedTenant, TenantView};

impl Identity {
    /// `POST /tenants`: returns the raw tenant key once; installs the default policies.
    pub async fn create_tenant(
        &self,
        caller: &PlatformCaller,
        body: &Body,
    ) -> Result<CreatedTenant> {
        caller.authorize()?;
        let value = body.parse::<Value>()?;
        let mut f = Fields::root(&value);
        let name = f.required_str("name", 1, 100);
        let name = f.name("name", name);
        let settings = f.optional_object("settings").cloned().unwrap_or_default();
        f.finish()?;
        let Some(name) = name else {
            return Err(Error::internal_msg("validated name missing"));
        };
        let (tenant, key) = insert_tenant(self, &name, Value::Object(settings)).await?;
        let tenant_id: TenantId = tenant.id.into_id();
        if let Err(e) = self.provisioner.provision(tenant_id).await {
            // No half-made tenant: remove it again and report the failure.
            let id = tenant.id;
            let removed: Result<usize> = with_conn!(&self.db, conn => {
                diesel::delete(tenants::table.filter(tenants::id.eq(id))).execute(conn).await.db()
            });
            if let Err(re) = removed {
                tracing::error!(error = %re, tenant = %tenant_id, "cannot remove a tenant whose provisioning failed");
            }
            return Err(e);
        }
        publish(
            &self.bus,
            Event::new(
                "tenant.created",
                tenant_id,
                Severity::Info,
                json!({"tenant_id": tenant_id.to_string(), "name": tenant.name}),
            ),
        );
        Ok(CreatedTenant {
            id: tenant_id.to_string(),
            name: tenant.name,
            settings: tenant.settings.0,
            api_key: key.expose().to_owned(),
            created_at: clock::format_timestamp(tenant.created_at.0),
        })
    }

    /// `GET /tenants`: keys masked.
    pub async fn list_tenants(
        &self,
        caller: &PlatformCaller,
        pairs: &[(String, String)],
    ) -> Result<Page<TenantView>> {
        caller.authorize()?;
        let mut q = Query::new(pairs);
        let page = PageRequest::from_query(&mut q, MAX_LIMIT)?;
        let (total, rows): (i64, Vec<(TenantRow, Option<String>)>) = with_conn!(&self.db, conn => {
            let total = tenants::table.count().get_result(conn).await.db()?;
            let rows = tenants::table
                .left_join(
                    api_keys::table.on(api_keys::tenant_id
                        .eq(tenants::id)
                        .and(api_keys::kind.eq("tenant"))
                        .and(api_keys::revoked_at.is_null())),
                )
                .order((tenants::created_at.desc(), tenants::id.desc()))
                .offset(page.skip)
                .limit(page.limit)
                .select((TenantRow::as_select(), api_keys::masked.nullable()))
                .load(conn)
                .await
                .db()?;
            Ok::<_, Error>((total, rows))
        })?;
        let items = rows
            .into_iter()
            .map(|(t, masked)| TenantView::from_row(t, masked))
            .collect();
        Ok(Page::new(items, total, page))
    }

    /// The caller's own tenant with its masked key (`/status`; any role may read it).
    pub async fn own_tenant(&self, p: &steward_core::Principal) -> Result<TenantView> {
        p.authorize(steward_core::Op::StatsRead)?;
        self.tenant_summary(p.tenant).await
    }

    /// A tenant with its masked key.
    pub async fn tenant_summary(&self, tenant: TenantId) -> Result<TenantView> {
        let row: Option<(TenantRow, Option<String>)> = with_conn!(&self.db, conn => {
            tenants::table
                .left_join(
                    api_keys::table.on(api_keys::tenant_id
                        .eq(tenants::id)
                        .and(api_keys::kind.eq("tenant"))
                        .and(api_keys::revoked_at.is_null())),
                )
                .filter(tenants::id.eq(Id(tenant.0)))
                .select((TenantRow::as_select(), api_keys::masked.nullable()))
                .first(conn)
                .await
                .optional()
                .db()
        })?;
        row.map(|(t, m)| TenantView::from_row(t, m))
            .ok_or_else(|| Error::not_found(format!("tenant {tenant} was not found")))
    }
}

/// Inserts a tenant and its tenant key in one transaction.
async fn insert_tenant(
    identity: &Identity,
    name: &str,
    settings: Value,
) -> Result<(TenantRow, RawKey)> {
    let now = Ts(clock::now());
    let tenant = TenantRow {
        id: Id(uuid::Uuid::now_v7()),
        name: name.to_owned(),
        settings: Json(settings),
        created_at: now,
    };
    let key = RawKey::generate();
    let key_row = ApiKeyRow {
        id: Id(uuid::Uuid::now_v7()),
        tenant_id: tenant.id,
        user_id: None,
        kind: "tenant".into(),
        name: Some("tenant key".into()),
        key_hash: key.hash(),
        masked: key.masked(),
        jti: None,
        created_at: now,
        expires_at: None,
        revoked_at: None,
        last_used_at: None,
    };
    let (t, k) = (&tenant, &key_row);
    with_conn!(&identity.db, conn => {
        conn.transaction::<_, diesel::result::Error, _>(|conn| {
            async move {
                diesel::insert_into(tenants::table).values(t).execute(conn).await?;
                diesel::insert_into(api_keys::table).values(k).execute(conn).await?;
                Ok(())
            }
            .scope_boxed()
        })
        .await
        .db()
    })
    .map_err(|e| {
        if e.kind == ErrorKind::Conflict {
            Error::conflict(format!("a tenant named {name:?} already exists"))
        } else {
            e
        }
    })?;
    Ok((tenant, key))
}
