//! Request bodies, read whole only within a per-route limit and the
//! request's deadline. Only a few routes take a body: `/login` (a form with
//! the token), `POST /api/v1/silences` and
//! `POST /api/v1/incidents/{key}/updates` (small JSON documents); every
//! other handler never reads one, so hyper never reads it either. Each
//! handler that does reads it here, after it has checked who is asking,
//! so an unauthenticated client never makes the daemon read a byte.

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::Body as _;

use super::deadline::RequestTimedOut;

/// `/login`: `token=` and a token of a few hundred bytes at most.
pub(super) const LOGIN_LIMIT: usize = 4 * 1024;
/// `POST /api/v1/silences`: a pattern of at most 256 bytes and a reason of
/// at most 1024, JSON-escaped (up to six bytes a character), fit.
pub(super) const SILENCE_LIMIT: usize = 16 * 1024;
/// `POST /api/v1/incidents/{key}/updates`: a state and a text of at most
/// [`MAX_TEXT`](crate::incident_update::MAX_TEXT) bytes, JSON-escaped, fit;
/// the incident page's form too (form-encoded, three bytes a byte at most,
/// with its anti-forgery token).
pub(super) const UPDATE_LIMIT: usize = 6 * crate::incident_update::MAX_TEXT + 1024;

/// Why a body was not read, as the answer to give.
#[derive(Debug)]
pub(super) struct Refused {
    pub status: StatusCode,
    pub message: String,
}

/// The whole body, at most `limit` bytes. A body announced larger is
/// refused before any of it is read; one that turns out larger stops
/// being read at `limit`.
pub(super) async fn read(body: Body, limit: usize, what: &str) -> Result<Bytes, Refused> {
    let too_large = || Refused {
        status: StatusCode::PAYLOAD_TOO_LARGE,
        message: format!("{what} takes a body of at most {limit} bytes"),
    };
    if body.size_hint().lower() > limit as u64 {
        return Err(too_large());
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(err) if err.downcast_ref::<LengthLimitError>().is_some() => Err(too_large()),
        Err(err) => match timed_out(err.as_ref()) {
            Some(timed_out) => Err(Refused {
                status: StatusCode::REQUEST_TIMEOUT,
                message: format!("{timed_out}; send it whole, at once"),
            }),
            None => Err(Refused {
                status: StatusCode::BAD_REQUEST,
                message: format!("the request body could not be read: {err}"),
            }),
        },
    }
}

/// The deadline's error, wherever it sits in `err`'s source chain (axum
/// and the limit each wrap it once).
fn timed_out<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a RequestTimedOut> {
    let mut next = Some(err);
    while let Some(err) = next {
        if let Some(found) = err.downcast_ref::<RequestTimedOut>() {
            return Some(found);
        }
        next = err.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_body_over_its_limit_is_a_413_whether_announced_or_not() {
        let announced = Body::from(vec![b'x'; LOGIN_LIMIT + 1]);
        let err = read(announced, LOGIN_LIMIT, "/login").await.unwrap_err();
        assert_eq!(err.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(err.message, "/login takes a body of at most 4096 bytes");
        let chunks = futures_util::stream::iter(
            (0..5).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; 1024]))),
        );
        let streamed = Body::from_stream(chunks);
        let err = read(streamed, LOGIN_LIMIT, "/login").await.unwrap_err();
        assert_eq!(err.status, StatusCode::PAYLOAD_TOO_LARGE);
        let fits = Body::from(vec![b'x'; LOGIN_LIMIT]);
        assert_eq!(
            read(fits, LOGIN_LIMIT, "/login").await.unwrap().len(),
            LOGIN_LIMIT
        );
    }
}
