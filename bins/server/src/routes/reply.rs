//! Success responses.

use actix_web::HttpResponse;
use serde::Serialize;

use crate::error::ApiResult;

pub fn ok<T: Serialize>(body: T) -> ApiResult<HttpResponse> {
    Ok(HttpResponse::Ok().json(body))
}

pub fn created<T: Serialize>(body: T) -> ApiResult<HttpResponse> {
    Ok(HttpResponse::Created().json(body))
}

pub fn accepted<T: Serialize>(body: T) -> ApiResult<HttpResponse> {
    Ok(HttpResponse::Accepted().json(body))
}

pub fn no_content() -> ApiResult<HttpResponse> {
    Ok(HttpResponse::NoContent().finish())
}
