//! Request extractors that never fail on their own: the raw body (bounded by
//! `MAX_REQUEST_BODY_BYTES`, 413 beyond) and the query pairs. Parsing happens in the services.

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{web, FromRequest, HttpRequest};
use futures_util::future::{ready, LocalBoxFuture, Ready};
use futures_util::FutureExt;
use steward_core::{Body, Error, ErrorKind};

use crate::error::ApiError;

/// The raw request body and its content type.
pub struct RawBody(pub Body);

impl FromRequest for RawBody {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let content_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let bytes = web::Bytes::from_request(req, payload);
        async move {
            let bytes = bytes.await.map_err(|e| {
                if e.as_response_error().status_code().as_u16() == 413 {
                    Error::new(ErrorKind::PayloadTooLarge, "the request body is too large")
                } else {
                    Error::bad_request("the request body could not be read")
                }
            })?;
            Ok(RawBody(Body::new(content_type, bytes.to_vec())))
        }
        .boxed_local()
    }
}

/// The decoded query parameters, in order.
pub struct QueryPairs(pub Vec<(String, String)>);

impl FromRequest for QueryPairs {
    type Error = ApiError;
    type Future = Ready<Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(Ok(QueryPairs(steward_core::validate::parse_query_string(
            req.query_string(),
        ))))
    }
}
