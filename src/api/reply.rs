//! How the JSON endpoints say no: `{"error": "..."}` with its status, and
//! a body that was refused before it was read.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::body;

/// `{"error": message}` with `code`.
pub(super) fn error(code: StatusCode, message: &str) -> Response {
    (code, Json(serde_json::json!({ "error": message }))).into_response()
}

/// A body that was not read, as JSON; a late one also ends the connection
/// (the rest of it may still be on its way).
pub(super) fn refused_body(refused: body::Refused) -> Response {
    let mut response = error(refused.status, &refused.message);
    if refused.status == StatusCode::REQUEST_TIMEOUT {
        response.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
    }
    response
}
