//! The body limit for requests whose length is not declared (`Transfer-Encoding: chunked`):
//! the body is read here, up to `MAX_REQUEST_BODY_BYTES`, before any handler runs, so that a
//! body over the limit answers 413 on every operation — also on those whose handler never
//! reads the body (suspend, block, logout …), which would otherwise act on the request and
//! ignore the rest of the stream. Bodies with a `Content-Length` are checked against the
//! declared length by the request middleware; WebSocket upgrades keep their stream.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header;
use actix_web::middleware::Next;
use actix_web::web;
use futures_util::StreamExt;
use steward_core::ErrorKind;

use crate::error::problem_response;
use crate::state::AppState;

pub async fn body_limit(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let limit = req
        .app_data::<web::Data<AppState>>()
        .map(|s| s.settings.max_request_body_bytes);
    let undeclared = !req.headers().contains_key(header::CONTENT_LENGTH);
    let upgrade = req.headers().contains_key(header::UPGRADE);
    if let (Some(limit), true, false) = (limit, undeclared, upgrade) {
        let mut payload = std::mem::replace(req.parts_mut().1, actix_web::dev::Payload::None);
        let mut body = web::BytesMut::new();
        let mut failed = false;
        while let Some(chunk) = payload.next().await {
            match chunk {
                Ok(chunk) if body.len() + chunk.len() <= limit => body.extend_from_slice(&chunk),
                Ok(_) => {
                    let detail = format!("the request body exceeds the limit of {limit} bytes");
                    let res = problem_response(ErrorKind::PayloadTooLarge, &detail, &[]);
                    return Ok(req.into_response(res));
                }
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        if failed {
            let res = problem_response(
                ErrorKind::BadRequest,
                "the request body could not be read",
                &[],
            );
            return Ok(req.into_response(res));
        }
        req.set_payload(actix_web::dev::Payload::from(body.freeze()));
    }
    next.call(req)
        .await
        .map(ServiceResponse::map_into_boxed_body)
}
