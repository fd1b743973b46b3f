//! The audit log endpoints.

use actix_web::http::header;
use actix_web::{web, HttpResponse};
use futures_util::StreamExt;
use steward_audit::export::{ExportFile, Format, SyncExport};
use tokio::io::AsyncReadExt;

use crate::auth::ApiCaller;
use crate::error::ApiResult;
use crate::extract::{QueryPairs, RawBody};
use crate::routes::registrar::Registrar;
use crate::routes::reply::{accepted, created, ok};
use crate::state::AppState;

type State = web::Data<AppState>;

/// The routes of this area, each registered with its documentation.
pub fn routes(r: &mut Registrar) {
    r.add::<__path_list>(web::to(list));
    r.add::<__path_log>(web::to(log));
    r.add::<__path_export>(web::to(export));
    r.add::<__path_export_json>(web::to(export_json));
    r.add::<__path_export_csv>(web::to(export_csv));
    r.add::<__path_export_async>(web::to(export_async));
    r.add::<__path_export_status>(web::to(export_status));
    r.add::<__path_export_download>(web::to(export_download));
    r.add::<__path_verify>(web::to(verify));
    r.add::<__path_get>(web::to(get));
}

/// List audit entries, newest first.
#[utoipa::path(get, path = "/api/v1/audit", tag = "audit", security(("ApiKey" = []), ("bearer" = [])), params(steward_core::schema::PageParams, crate::routes::schemas::AuditFilters), responses((status = 200, body = steward_core::page::Page<steward_audit::service::AuditEntry>)))]
pub async fn list(state: State, caller: ApiCaller, q: QueryPairs) -> ApiResult<HttpResponse> {
    ok(state.audit.list(&caller.0, &q.0).await?)
}

/// Verify the tenant's hash chain and signatures.
#[utoipa::path(get, path = "/api/v1/audit/verify", tag = "audit", security(("ApiKey" = []), ("bearer" = [])), responses((status = 200, body = steward_audit::service::Verification)))]
pub async fn verify(state: State, caller: ApiCaller) -> ApiResult<HttpResponse> {
    ok(state.audit.verify(&caller.0).await?)
}

/// One audit entry.
#[utoipa::path(get, path = "/api/v1/audit/{id}", tag = "audit", security(("ApiKey" = []), ("bearer" = [])), responses((status = 200, body = steward_audit::service::AuditEntry, description = "the entry")))]
pub async fn get(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    ok(state.audit.get(&caller.0, &id).await?)
}

/// Write an audit entry for an agent action.
#[utoipa::path(post, path = "/api/v1/audit/log", tag = "audit", security(("ApiKey" = []), ("bearer" = [])), request_body(content = crate::routes::schemas::AuditLog, content_type = "application/json", example = json!({"agent_id": "5b0e…", "action": "read_data", "resource": "db/customers", "input": {"query": "select 1"}, "output": {"rows": 1}, "reasoning": ["the user asked"], "risk_score": 0.1, "is_approved": false})), responses((status = 201, body = steward_audit::service::AuditEntry)))]
pub async fn log(state: State, caller: ApiCaller, body: RawBody) -> ApiResult<HttpResponse> {
    created(state.audit.log(&caller.0, &body.0).await?)
}

fn attachment(name: &str) -> (header::HeaderName, String) {
    (
        header::CONTENT_DISPOSITION,
        format!("attachment; filename=\"{name}\""),
    )
}

fn stream_export(e: SyncExport) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(e.format.content_type())
        .insert_header(attachment(&e.file_name))
        .streaming(e.body.map(|chunk| chunk.map(web::Bytes::from)))
}

async fn export_with(
    state: State,
    caller: ApiCaller,
    q: QueryPairs,
    fixed: Option<Format>,
) -> ApiResult<HttpResponse> {
    Ok(stream_export(
        state.audit.export(&caller.0, &q.0, fixed).await?,
    ))
}

/// Export the audit log (`format` = jsonl, json or csv; at most 10,000 records).
#[utoipa::path(get, path = "/api/v1/audit/export", tag = "audit", security(("ApiKey" = []), ("bearer" = [])), params(crate::routes::schemas::ExportOptions, crate::routes::schemas::AuditFilters), responses((status = 200, description = "The entries: JSON lines (`application/x-ndjson`, one entry object per line), a JSON array of entries (`application/json`) or CSV (`text/csv`), per `format`", content((Vec<steward_audit::service::AuditEntry> = "application/json"), (String = "application/x-ndjson"), (String = "text/csv"))), (status = 422, description = "too many entries for a synchronous export (`export_too_large`) or bad filters")))]
pub async fn export(state: State, caller: ApiCaller, q: QueryPairs) -> ApiResult<HttpResponse> {
    export_with(state, caller, q, None).await
}

/// Export entries as a JSON array (same filters as `/audit/export`).
#[utoipa::path(get, path = "/api/v1/audit/export/json", tag = "audit", security(("ApiKey" = []), ("bearer" = [])), params(crate::routes::schemas::ExportLimit, crate::routes::schemas::AuditFilters), responses((status = 200, content_type = "application/json", description = "the entries"), (status = 422, description = "too many entries for a synchronous export (`export_too_large`) or bad filters")))]
pub async fn export_json(
    state: State,
    caller: ApiCaller,
    q: QueryPairs,
) -> ApiResult<HttpResponse> {
    export_with(state, caller, q, Some(Format::Json)).await
}

/// Export entries as CSV (same filters as `/audit/export`).
#[utoipa::path(get, path = "/api/v1/audit/export/csv", tag = "audit", security(("ApiKey" = []), ("bearer" = [])), params(crate::routes::schemas::ExportLimit, crate::routes::schemas::AuditFilters), responses((status = 200, content_type = "text/csv", description = "the entries"), (status = 422, description = "too many entries for a synchronous export (`export_too_large`) or bad filters")))]
pub async fn export_csv(state: State, caller: ApiCaller, q: QueryPairs) -> ApiResult<HttpResponse> {
    export_with(state, caller, q, Some(Format::Csv)).await
}

/// Start an asynchronous export job.
#[utoipa::path(post, path = "/api/v1/audit/export/async", tag = "audit", security(("ApiKey" = []), ("bearer" = [])), params(crate::routes::schemas::AuditFilters), request_body(content = Option<crate::routes::schemas::ExportRequest>, content_type = "application/json", example = json!({"format": "jsonl", "limit": 100000})), responses((status = 202, body = steward_audit::export::ExportJob), (status = 409, description = "the tenant already has 10 export jobs queued or running")))]
pub async fn export_async(
    state: State,
    caller: ApiCaller,
    q: QueryPairs,
    body: RawBody,
) -> ApiResult<HttpResponse> {
    accepted(state.audit.start_export(&caller.0, &q.0, &body.0).await?)
}

/// The state and progress of an asynchronous export.
#[utoipa::path(get, path = "/api/v1/audit/export/status/{id}", tag = "audit", security(("ApiKey" = []), ("bearer" = [])), responses((status = 200, body = steward_audit::export::ExportJob, description = "`{id, status, progress, …}`")))]
pub async fn export_status(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    ok(state.audit.export_status(&caller.0, &id).await?)
}

/// Streams a completed export file in 64 KiB chunks.
fn stream_file(file: ExportFile, handle: tokio::fs::File) -> HttpResponse {
    let chunks = futures_util::stream::unfold(handle, |mut f| async move {
        let mut buf = vec![0u8; 64 * 1024];
        match f.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok::<_, std::io::Error>(web::Bytes::from(buf)), f))
            }
            Err(e) => Some((Err(e), f)),
        }
    });
    HttpResponse::Ok()
        .content_type(file.format.content_type())
        .insert_header(attachment(&file.file_name))
        .streaming(chunks)
}

/// Download a finished asynchronous export.
#[utoipa::path(get, path = "/api/v1/audit/export/download/{id}", tag = "audit", security(("ApiKey" = []), ("bearer" = [])), responses((status = 200, description = "the export file"), (status = 404, description = "no such job in the caller's tenant, or its file is gone (deleted, or on an instance that does not share EXPORT_STORAGE_PATH)"), (status = 409, description = "the export is not finished")))]
pub async fn export_download(
    state: State,
    caller: ApiCaller,
    id: web::Path<String>,
) -> ApiResult<HttpResponse> {
    let file = state
        .audit
        .export_file(&caller.0, &id, &state.settings.export_storage_path)
        .await?;
    let handle = tokio::fs::File::open(&file.path).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            // Deleted, or written by an instance that does not share EXPORT_STORAGE_PATH.
            steward_core::Error::not_found(format!(
                "the file of export job {} is no longer there; start a new export",
                id.as_str()
            ))
        } else {
            steward_core::Error::internal_msg(format!("export file {}: {e}", file.path.display()))
        }
    })?;
    Ok(stream_file(file, handle))
}
