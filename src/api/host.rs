//! The `Host` rule: a request must name this API, or it gets 421.
//!
//! DNS rebinding is why. A page on `evil.example` can make its own name
//! resolve to 127.0.0.1 a moment after loading; the browser then sends the
//! page's requests to vigie's loopback port as same-origin requests, and
//! lets the page read the answers, but it still writes `Host:
//! evil.example`. Refusing every name vigie was not told about closes that
//! door. Accepted: the listen address itself, `localhost`, the names of
//! `[api] hosts` (how a remote client or a proxy names it) and, when vigie
//! listens on every address, any IP address (a rebinding page can only
//! make the browser send a name, never an address it did not type).
//!
//! A request with no `Host` at all passes: every browser sends one, and
//! only a browser can be rebound.

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use super::reply::error;
use super::ApiState;

pub(super) async fn require_known_host(
    State(state): State<ApiState>,
    request: Request,
    next: Next,
) -> Response {
    let named = request
        .headers()
        .get(header::HOST)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .or_else(|| request.uri().authority().map(|a| a.to_string()));
    let Some(named) = named else {
        return next.run(request).await;
    };
    let config = state.config.borrow().clone();
    if is_known(&named, &config.api) {
        return next.run(request).await;
    }
    let shown: String = crate::sanitize::escape_controls(&named)
        .chars()
        .take(100)
        .collect();
    error(
        StatusCode::MISDIRECTED_REQUEST,
        &format!(
            "Host {shown:?} does not name this API: use {} or localhost, or add the name to [api] hosts",
            config.api.listen
        ),
    )
}

/// Whether `named` (a `Host` header: a name or address, with or without a
/// port) names this API.
fn is_known(named: &str, api: &crate::config::ApiConfig) -> bool {
    let host = host_part(named).trim_end_matches('.').to_ascii_lowercase();
    let listen = api.listen.ip();
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip == listen || listen.is_unspecified() || api.hosts.contains(&host),
        Err(_) => host == "localhost" || api.hosts.contains(&host),
    }
}

/// `named` without its port and an IPv6 address without its brackets.
fn host_part(named: &str) -> &str {
    let named = named.trim();
    if let Some(rest) = named.strip_prefix('[') {
        return rest.split_once(']').map_or(rest, |(ip, _)| ip);
    }
    match named.rsplit_once(':') {
        // One colon: a name or IPv4 address and a port.
        Some((host, _port)) if !host.contains(':') => host,
        _ => named,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(listen: &str, hosts: &[&str]) -> crate::config::ApiConfig {
        crate::config::ApiConfig {
            listen: listen.parse().unwrap(),
            token_file: None,
            tls: None,
            ca_file: None,
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            request_timeout: std::time::Duration::from_secs(10),
            session_ttl: std::time::Duration::from_secs(3600),
            socket: None,
            public_url: None,
        }
    }

    #[test]
    fn the_listen_address_localhost_and_the_configured_names_pass() {
        let api = api("127.0.0.1:9464", &["vigie.example.com"]);
        for named in [
            "127.0.0.1:9464",
            "127.0.0.1",
            "localhost:9464",
            "LocalHost",
            "vigie.example.com",
            "Vigie.Example.com.:443",
        ] {
            assert!(is_known(named, &api), "{named}");
        }
        for named in [
            "evil.example:9464",
            "127.0.0.2:9464",
            "localhost.evil.example",
            "[::1]:9464",
            "",
        ] {
            assert!(!is_known(named, &api), "{named}");
        }
    }

    #[test]
    fn on_every_address_any_ip_passes_but_no_other_name() {
        let api = api("[::]:9464", &[]);
        assert!(is_known("[::1]:9464", &api));
        assert!(is_known("10.0.0.5:9464", &api));
        assert!(!is_known("evil.example", &api));
        let api = self::api("[::1]:9464", &[]);
        assert!(is_known("[::1]:9464", &api));
        assert!(!is_known("127.0.0.1:9464", &api));
    }
}
