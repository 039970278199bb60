//! Who may ask: the bearer token of `[api] token_file` (read here, by the
//! daemon that requires it and the CLI that sends it), and the browser
//! sessions opened with it at `/login` (reading only). [`Token`] holds the
//! token in force, the sessions made from it (all ended when a reload
//! brings another token) and the login throttle.
//!
//! Every check here reads headers only. A request's body is read by its
//! handler after this middleware let it through, so a client without the
//! token never makes the daemon read one.

use std::sync::{Arc, RwLock};

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use super::peer::Peer;
use super::reply::error;
use super::session::{self, Sessions};
use super::throttle::Throttle;
use super::ApiState;

/// The API token, swapped when a reload reads a new `token_file`, with the
/// sessions and login attempts that go with it. Its `Debug` never shows
/// the token.
#[derive(Clone, Default)]
pub struct Token(Arc<Credentials>);

#[derive(Default)]
struct Credentials {
    token: RwLock<Option<Arc<str>>>,
    sessions: Sessions,
    logins: Throttle,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token([redacted])")
    }
}

impl Token {
    /// Puts `token` in force; a different one ends every session.
    pub fn set(&self, token: Option<Arc<str>>) {
        let mut current = self.0.token.write().unwrap_or_else(|p| p.into_inner());
        if *current != token {
            self.0.sessions.clear();
        }
        *current = token;
    }

    pub(super) fn current(&self) -> Option<Arc<str>> {
        self.0
            .token
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(super) fn sessions(&self) -> &Sessions {
        &self.0.sessions
    }

    pub(super) fn logins(&self) -> &Throttle {
        &self.0.logins
    }

    /// Whether `offered` is the token in force.
    pub(super) fn matches(&self, offered: &str) -> bool {
        self.current()
            .is_some_and(|token| constant_time_eq(offered.trim().as_bytes(), token.as_bytes()))
    }
}

/// The token of an `Authorization: Bearer ...` header. The scheme name is
/// case-insensitive (RFC 9110 section 11.1).
pub(super) fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
}

/// A GET or HEAD carrying an open session's cookie (a token must be in
/// force: sessions exist only with one).
pub(super) fn has_session(request: &Request, token: &Token) -> bool {
    matches!(*request.method(), Method::GET | Method::HEAD)
        && session_csrf(request, token).is_some()
}

/// The anti-forgery token of the open session `request`'s cookie names,
/// whatever its method: the one form a session may post checks it.
pub(super) fn session_csrf(request: &Request, token: &Token) -> Option<String> {
    let tls = request.extensions().get::<Peer>().is_some_and(|p| p.tls);
    token.current()?;
    session::presented(request.headers(), tls).and_then(|id| token.sessions().csrf(id))
}

/// Whether `request` came over the local socket from a user allowed to
/// control vigie (`local.rs`): that stands for the token.
pub(super) fn is_local(request: &Request) -> bool {
    request.extensions().get::<Peer>().is_some_and(|p| p.local)
}

/// The rule of the endpoints that change something (`what`: silences,
/// incident updates): over TCP they need the token even on loopback, where
/// any local user could otherwise ask; over the local socket, the peer's
/// credentials stand for it. `require_token` has already checked a token
/// that was sent; this refuses when none is configured at all.
pub(super) fn refuse_change(state: &ApiState, request: &Request, what: &str) -> Option<Response> {
    if is_local(request) || state.token.current().is_some() {
        return None;
    }
    Some(error(
        StatusCode::FORBIDDEN,
        &format!("{what} over TCP need the token: set [api] token_file (the CLI reads it from the same config), or run the command on this machine, where it uses the local socket (as root, the daemon's user, or a member of the group vigie)"),
    ))
}

/// The JSON endpoints' rule: with a token in force, every one but
/// `/healthz` needs it, or, for reading, a browser session.
pub(super) async fn require_token(
    State(state): State<ApiState>,
    request: Request,
    next: Next,
) -> Response {
    if state.token.current().is_none() || request.uri().path() == "/healthz" {
        return next.run(request).await;
    }
    // The local socket let this user in by its credentials.
    if is_local(&request) {
        return next.run(request).await;
    }
    // A browser logged in to the pages reads the JSON behind them (the day
    // bars' figures) with its session cookie; reading only.
    if has_session(&request, &state.token) {
        return next.run(request).await;
    }
    match bearer(request.headers()) {
        Some(offered) if state.token.matches(offered) => next.run(request).await,
        _ => error(
            StatusCode::UNAUTHORIZED,
            "this endpoint needs `Authorization: Bearer <token from [api] token_file>`",
        ),
    }
}

/// Compares without an early exit, so response timing does not reveal how
/// much of a guessed token was right.
pub(super) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Why the API token cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read [api] token_file {}: {source}", path.display())]
pub struct TokenFileError {
    pub path: std::path::PathBuf,
    pub source: std::io::Error,
}

/// The token of `[api] token_file`, if one is configured: the daemon
/// requires it, the CLI sends it.
pub fn read_token(config: &crate::config::Config) -> Result<Option<Arc<str>>, TokenFileError> {
    let Some(path) = &config.api.token_file else {
        return Ok(None);
    };
    let error = |source| TokenFileError {
        path: path.clone(),
        source,
    };
    let token = std::fs::read_to_string(path).map_err(error)?;
    let token = token.trim();
    if token.is_empty() {
        return Err(error(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the file is empty",
        )));
    }
    // `validate` says so too; checked again here because a reload reads
    // the file anew and its content may have changed since.
    let minimum = crate::config::limits::MIN_REMOTE_TOKEN_BYTES;
    if !config.api.listen.ip().is_loopback() && token.len() < minimum {
        return Err(error(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "the token is {} bytes; a listen address that is not loopback needs at least {minimum} (e.g. `openssl rand -hex 32`)",
                token.len()
            ),
        )));
    }
    Ok(Some(Arc::from(token)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_token() {
        let token = Token::default();
        token.set(Some(Arc::from("s3cret-token")));
        assert_eq!(format!("{token:?}"), "Token([redacted])");
        assert!(token.matches(" s3cret-token\n"));
        assert!(!token.matches("s3cret-toke"));
    }

    #[tokio::test]
    async fn a_new_token_ends_the_sessions_of_the_old_one() {
        let token = Token::default();
        token.set(Some(Arc::from("one")));
        let id = token
            .sessions()
            .open(std::time::Duration::from_secs(60))
            .unwrap();
        token.set(Some(Arc::from("one")));
        assert!(token.sessions().csrf(&id).is_some(), "the same token again");
        token.set(Some(Arc::from("two")));
        assert!(token.sessions().csrf(&id).is_none());
    }
}
