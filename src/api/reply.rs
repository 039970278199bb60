//! How the JSON endpoints say no: `{"error": "..."}` with its status, a
//! body that was refused before it was read, and one that is not the
//! document the endpoint takes.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::body;

/// `{"error": message}` with `code`.
pub(super) fn error(code: StatusCode, message: &str) -> Response {
    (code, Json(serde_json::json!({ "error": message }))).into_response()
}

/// The JSON document `T` in `request`'s body of at most `limit` bytes, or
/// the answer that says why not: `what` names the endpoint, `shape` the
/// document it takes (`a silence ({"pattern", "for", "reason"})`).
pub(super) async fn json_body<T: serde::de::DeserializeOwned>(
    request: axum::extract::Request,
    limit: usize,
    what: &str,
    shape: &str,
) -> Result<T, Response> {
    let bytes = body::read(request.into_body(), limit, what)
        .await
        .map_err(refused_body)?;
    serde_json::from_slice(&bytes).map_err(|err| {
        error(
            StatusCode::BAD_REQUEST,
            &format!("the body is not {shape}: {err}"),
        )
    })
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
