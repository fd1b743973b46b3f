//! SIEM export status and test event (contract 22): platform administration only.

use std::time::Duration;

use actix_web::{web, HttpResponse};
use steward_identity::PlatformCaller;
use steward_siem::{Format, SiemConfig, TransportConfig, TransportKind};

use crate::auth::PlatformAuth;
use crate::error::ApiResult;
use crate::extract::RawBody;
use crate::routes::registrar::Registrar;
use crate::routes::reply::ok;
use crate::settings::Settings;
use crate::state::AppState;

type State = web::Data<AppState>;

/// The routes of this area, each registered with its documentation.
pub fn routes(r: &mut Registrar) {
    r.add::<__path_status>(web::to(status));
    r.add::<__path_test>(web::to(test));
}

/// The exporter's configuration from the settings (`auto` resolved).
pub fn config(settings: &Settings) -> SiemConfig {
    let s = &settings.siem;
    SiemConfig {
        enabled: s.enabled,
        batch_size: s.batch_size.max(1),
        batch_timeout: Duration::from_secs(s.batch_timeout_seconds),
        max_retries: s.max_retries,
        transport: TransportConfig {
            kind: TransportKind::resolve(
                &s.transport,
                s.splunk_hec_url.as_deref(),
                s.elk_url.as_deref(),
            ),
            format: Format::parse(&s.format).unwrap_or(Format::Syslog),
            host: s.host.clone(),
            port: s.port,
            tls: s.tls,
            ca_file: s.tls_ca_file.clone(),
            connect_timeout: Duration::from_secs(s.connect_timeout_seconds),
            hec_url: s.splunk_hec_url.clone(),
            hec_token: s.splunk_hec_token.as_ref().map(|t| t.expose().to_owned()),
            hec_sourcetype: s.splunk_hec_sourcetype.clone(),
            elk_url: s.elk_url.clone(),
            elk_index: s.elk_index.clone(),
            elk_username: s.elk_username.clone(),
            elk_password: s.elk_password.as_ref().map(|t| t.expose().to_owned()),
        },
    }
}

/// The export settings and delivery counters.
#[utoipa::path(get, path = "/api/v1/siem/status", tag = "siem",
    security(("AdminKey" = []), ("bearer" = [])),
    responses((status = 200, body = steward_siem::SiemStatus, description = "`{enabled, format, transport, host, port, tls, batch_size, batch_timeout, max_retries, connect_timeout, queued, sent, failed, duplicates, retries, last_error}`",
                example = json!({"enabled": true, "format": "jsonl", "transport": "syslog", "host": "127.0.0.1", "port": 5514, "tls": false, "batch_size": 1, "batch_timeout": 1.0, "max_retries": 3, "connect_timeout": 5.0, "queued": 0, "sent": 12, "failed": 0, "duplicates": 0, "retries": 0, "last_error": null})),
              (status = 401, description = "No or invalid credentials (a tenant API key is not accepted)", content_type = "application/problem+json"),
              (status = 403, description = "A JWT of a user who is not a super admin", content_type = "application/problem+json")))]
pub async fn status(state: State, caller: PlatformAuth) -> ApiResult<HttpResponse> {
    caller.0.authorize()?;
    ok(state.siem.status().await?)
}

/// Sends a `siem.test` event synchronously and reports whether it was delivered.
#[utoipa::path(post, path = "/api/v1/siem/test", tag = "siem",
    security(("AdminKey" = []), ("bearer" = [])),
    responses((status = 200, body = steward_siem::SiemTestResult, description = "`{enabled, event_type: \"siem.test\", delivered, error}`",
                example = json!({"enabled": true, "event_type": "siem.test", "delivered": true, "error": null})),
              (status = 401, description = "No or invalid credentials (a tenant API key is not accepted)", content_type = "application/problem+json"),
              (status = 403, description = "A JWT of a user who is not a super admin", content_type = "application/problem+json")))]
pub async fn test(state: State, caller: PlatformAuth, body: RawBody) -> ApiResult<HttpResponse> {
    caller.0.authorize()?;
    body.0.unread()?;
    let tenant = match &caller.0 {
        PlatformCaller::User(p) => p.tenant,
        PlatformCaller::AdminKey => steward_core::TenantId(uuid::Uuid::nil()),
    };
    ok(state.siem.send_test(tenant).await?)
}
