//! Browser sessions: what `/login` hands a browser that gave the token.
//!
//! A session is a random 256-bit id that the daemon remembers with its
//! expiry (`[api] session_ttl`), never a value derived from the token: a
//! cookie copied off a machine stops working when it expires or when the
//! token changes, and it never lets anyone recompute or test the token.
//! Sessions live in memory only, so a restart logs every browser out.
//!
//! The cookie is HttpOnly and SameSite=Strict; over TLS it is also
//! `Secure` and named with the `__Host-` prefix, which browsers only
//! accept from a secure origin, for the whole host (`Path=/`, no
//! `Domain`), so that no sibling site or plain-HTTP page can plant or
//! read it.
//!
//! Each session also has its own random anti-forgery token, put in the
//! one form a session may post (an incident update) and checked against
//! the session's when it comes back: a page of another site can make a
//! browser send the cookie, never read the token.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use axum::http::{header, HeaderMap};
use tokio::time::Instant;

/// At most this many sessions are kept; beyond, the one nearest its end
/// makes room. Only a token holder can open one, so this only bounds what
/// a script logging in in a loop could make the daemon remember.
const MAX_SESSIONS: usize = 1024;

const COOKIE: &str = "vigie_session";
const SECURE_COOKIE: &str = "__Host-vigie_session";

/// The open sessions: id -> when it ends and its anti-forgery token.
#[derive(Default)]
pub(super) struct Sessions {
    open: Mutex<HashMap<String, Session>>,
}

struct Session {
    ends: Instant,
    csrf: String,
}

/// 256 random bits in hex; `None` if the system's random source failed.
fn random_hex() -> Option<String> {
    let mut bytes = [0u8; 32];
    crate::net::crypto_provider()
        .secure_random
        .fill(&mut bytes)
        .ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

impl Sessions {
    /// A new session lasting `ttl`; `None` if the system's random source
    /// failed (then no session is made at all).
    pub(super) fn open(&self, ttl: Duration) -> Option<String> {
        let id = random_hex()?;
        let csrf = random_hex()?;
        let now = Instant::now();
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|_, s| s.ends > now);
        if open.len() >= MAX_SESSIONS {
            let nearest = open
                .iter()
                .min_by_key(|(_, s)| s.ends)
                .map(|(id, _)| id.clone());
            if let Some(nearest) = nearest {
                open.remove(&nearest);
            }
        }
        let session = Session {
            ends: now + ttl,
            csrf,
        };
        open.insert(id.clone(), session);
        Some(id)
    }

    /// The anti-forgery token of session `id` while it is open; `None`
    /// for a session that ended or never was. The lookup's timing does
    /// not help a guesser: ids are 256 random bits, and the map's hash is
    /// keyed at random.
    pub(super) fn csrf(&self, id: &str) -> Option<String> {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.get(id)
            .filter(|s| s.ends > Instant::now())
            .map(|s| s.csrf.clone())
    }

    /// Ends every session (the token changed).
    pub(super) fn clear(&self) {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

/// The cookie's name: `__Host-` prefixed over TLS.
fn cookie_name(tls: bool) -> &'static str {
    match tls {
        true => SECURE_COOKIE,
        false => COOKIE,
    }
}

/// The `Set-Cookie` value that hands a browser session `id`.
pub(super) fn set_cookie(id: &str, ttl: Duration, tls: bool) -> String {
    let name = cookie_name(tls);
    let secure = if tls { "; Secure" } else { "" };
    format!(
        "{name}={id}; Path=/; Max-Age={}; HttpOnly; SameSite=Strict{secure}",
        ttl.as_secs().max(1)
    )
}

/// The session id a request presents, if any.
pub(super) fn presented(headers: &HeaderMap, tls: bool) -> Option<&str> {
    let name = cookie_name(tls);
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_session_ends_after_its_ttl_and_with_the_token() {
        let sessions = Sessions::default();
        let id = sessions.open(Duration::from_secs(60)).unwrap();
        assert_eq!(id.len(), 64);
        assert!(sessions.csrf(&id).is_some());
        let other = sessions.open(Duration::from_secs(60)).unwrap();
        assert_ne!(id, other, "random, not derived from anything");
        let csrf = sessions.csrf(&id).unwrap();
        assert_eq!(csrf.len(), 64);
        assert_ne!(csrf, id);
        assert_ne!(Some(csrf), sessions.csrf(&other), "one per session");
        tokio::time::advance(Duration::from_secs(61)).await;
        assert!(sessions.csrf(&id).is_none());
        let third = sessions.open(Duration::from_secs(60)).unwrap();
        sessions.clear();
        assert!(sessions.csrf(&third).is_none());
    }

    #[tokio::test]
    async fn the_number_kept_is_bounded() {
        let sessions = Sessions::default();
        let first = sessions.open(Duration::from_secs(10)).unwrap();
        for _ in 0..MAX_SESSIONS {
            sessions.open(Duration::from_secs(60)).unwrap();
        }
        assert!(
            sessions.csrf(&first).is_none(),
            "the nearest to its end made room"
        );
        assert_eq!(sessions.open.lock().unwrap().len(), MAX_SESSIONS);
    }

    #[test]
    fn over_tls_the_cookie_is_secure_and_host_prefixed() {
        assert_eq!(
            set_cookie("ab", Duration::from_secs(3600), true),
            "__Host-vigie_session=ab; Path=/; Max-Age=3600; HttpOnly; SameSite=Strict; Secure"
        );
        assert_eq!(
            set_cookie("ab", Duration::from_secs(3600), false),
            "vigie_session=ab; Path=/; Max-Age=3600; HttpOnly; SameSite=Strict"
        );
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            "a=b; vigie_session=plain; __Host-vigie_session=secure"
                .parse()
                .unwrap(),
        );
        assert_eq!(presented(&headers, false), Some("plain"));
        assert_eq!(presented(&headers, true), Some("secure"));
    }
}
