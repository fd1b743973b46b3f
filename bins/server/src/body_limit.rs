//! Every request body is read here, before any handler runs: up to `MAX_REQUEST_BODY_BYTES`
//! (413 beyond), and all of it within `REQUEST_BODY_TIMEOUT_SECONDS` (408 after, so a client
//! that declares a body and sends it slowly or never holds no connection and no task). A body
//! whose length is not declared (`Transfer-Encoding: chunked`) over the limit thus answers 413
//! on every operation — also on those whose handler never reads the body (suspend, block,
//! logout …), which would otherwise act on the request and ignore the rest of the stream.
//! Declared lengths over the limit are refused earlier by the request middleware; WebSocket
//! handshakes keep their stream.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header;
use actix_web::middleware::Next;
use actix_web::web;
use std::time::Duration;

use futures_util::StreamExt;
use steward_core::ErrorKind;

use crate::error::problem_response;
use crate::state::AppState;

/// A WebSocket handshake (`GET` with `Upgrade: websocket`) keeps its stream. Any other
/// request naming an `Upgrade` is an ordinary request and its body is limited like every
/// other: an `Upgrade: foo` on a `POST` must not carry an unread body past the limit to a
/// handler that acts without reading it.
fn websocket_handshake(req: &ServiceRequest) -> bool {
    req.method() == actix_web::http::Method::GET
        && req
            .headers()
            .get(header::UPGRADE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("websocket"))
}

pub async fn body_limit(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let settings = req.app_data::<web::Data<AppState>>().map(|s| {
        (
            s.settings.max_request_body_bytes,
            s.settings.request_body_timeout_seconds,
        )
    });
    // No route answers CONNECT, and actix-http reads a CONNECT request's stream as its body:
    // it would be held until the body time-out. Refused at once, the connection closed.
    if req.method() == actix_web::http::Method::CONNECT {
        let mut res = problem_response(
            steward_core::ErrorKind::MethodNotAllowed,
            "CONNECT is not supported",
            &[],
        );
        res.head_mut()
            .set_connection_type(actix_web::http::ConnectionType::Close);
        return Ok(req.into_response(res));
    }
    if let (Some((limit, timeout)), false) = (settings, websocket_handshake(&req)) {
        let payload = std::mem::replace(req.parts_mut().1, actix_web::dev::Payload::None);
        // A request without a body (no length, not chunked) has no payload to read.
        if matches!(payload, actix_web::dev::Payload::None) {
            return next
                .call(req)
                .await
                .map(ServiceResponse::map_into_boxed_body);
        }
        match read_body(payload, limit, Duration::from_secs(timeout)).await {
            Ok(body) => req.set_payload(actix_web::dev::Payload::from(body)),
            Err((kind, detail)) => {
                // The rest of the body may still be on its way: the connection cannot carry
                // another request, so it is closed after the answer.
                let mut res = problem_response(kind, &detail, &[]);
                res.head_mut()
                    .set_connection_type(actix_web::http::ConnectionType::Close);
                return Ok(req.into_response(res));
            }
        }
    }
    next.call(req)
        .await
        .map(ServiceResponse::map_into_boxed_body)
}

/// The whole body, at most `limit` bytes, all of it within `timeout` of the first poll.
async fn read_body(
    mut payload: actix_web::dev::Payload,
    limit: usize,
    timeout: Duration,
) -> Result<web::Bytes, (ErrorKind, String)> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut body = web::BytesMut::new();
    loop {
        match tokio::time::timeout_at(deadline, payload.next()).await {
            Err(_) => {
                return Err((
                    ErrorKind::RequestTimeout,
                    format!(
                        "the request body did not arrive within {} s",
                        timeout.as_secs()
                    ),
                ))
            }
            Ok(None) => return Ok(body.freeze()),
            Ok(Some(Ok(chunk))) if body.len() + chunk.len() <= limit => {
                body.extend_from_slice(&chunk)
            }
            Ok(Some(Ok(_))) => {
                return Err((
                    ErrorKind::PayloadTooLarge,
                    format!("the request body exceeds the limit of {limit} bytes"),
                ))
            }
            Ok(Some(Err(_))) => {
                return Err((
                    ErrorKind::BadRequest,
                    "the request body could not be read".to_owned(),
                ))
            }
        }
    }
}
