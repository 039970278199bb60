//! The keys of the kinds that speak TLS without HTTP: `tls` (a handshake on
//! any port) and `smtp` (a mail server's STARTTLS or SMTPS), and the check
//! of vigie's own relay that `[smtp] watch` adds.

use std::collections::BTreeMap;
use std::time::Duration;

use rustls::pki_types::ServerName;
use toml::Spanned;
use url::{Host, Url};

use super::cx::Cx;
use crate::check::{
    AlertOverrides, Cadence, Check, CheckKind, SmtpCheck, SmtpTlsMode, TlsExpect, TlsPortCheck,
};
use crate::config::decode::Decoded;
use crate::config::raw::RawCheck;
use crate::config::{SmtpConfig, SmtpTls};

/// The name of the check `[smtp] watch` adds. The colon keeps it apart
/// from every name a checks file can use.
pub const RELAY_CHECK: &str = "vigie:smtp-relay";

/// How often the relay is looked at: its certificate changes over weeks,
/// and a relay sees each probe as a session in its logs.
const RELAY_EVERY: Duration = Duration::from_secs(300);

/// `address = "host:port"` and the optional `server_name` of a tls check,
/// and the `tls://host:port` URL outcomes show as its target.
pub(super) fn tls_port(
    cx: &mut Cx<'_>,
    d: &Decoded<RawCheck>,
    context: &str,
) -> Option<(TlsPortCheck, Url)> {
    let raw = &d.value;
    let address = cx.required(d, "address", raw.address.as_ref(), context)?;
    let Some((url, host, port)) = address_url(address.get_ref()) else {
        let message = format!(
            "{:?} is not host:port (e.g. \"imap.example.com:993\", \"[2001:db8::1]:5432\")",
            address.get_ref()
        );
        cx.error(&address.span(), "address", message);
        return None;
    };
    let server_name = match &raw.server_name {
        Some(name) => valid_server_name(cx, name)?,
        None => host.clone(),
    };
    Some((
        TlsPortCheck {
            host,
            port,
            server_name,
        },
        url,
    ))
}

/// `tls://host:port`, its host without brackets and its port, when
/// `address` is exactly a host and a port.
fn address_url(address: &str) -> Option<(Url, String, u16)> {
    let url = Url::parse(&format!("tls://{address}")).ok()?;
    let bare = url.path().is_empty()
        && url.query().is_none()
        && url.fragment().is_none()
        && url.username().is_empty()
        && url.password().is_none();
    let port = url.port().filter(|p| *p != 0)?;
    let host = host_of(&url)?;
    bare.then_some((url, host, port))
}

fn valid_server_name(cx: &mut Cx<'_>, name: &Spanned<String>) -> Option<String> {
    if ServerName::try_from(name.get_ref().as_str()).is_ok() {
        return Some(name.get_ref().clone());
    }
    let message = format!(
        "{:?} is not a DNS name or an IP address a certificate can be issued for",
        name.get_ref()
    );
    cx.error(&name.span(), "server_name", message);
    None
}

/// A URL's host as a connection and a TLS name use it: an IPv6 address
/// without its brackets.
fn host_of(url: &Url) -> Option<String> {
    match url.host()? {
        Host::Domain(name) if !name.is_empty() => Some(name.to_string()),
        Host::Domain(_) => None,
        Host::Ipv4(ip) => Some(ip.to_string()),
        Host::Ipv6(ip) => Some(ip.to_string()),
    }
}

/// The `url` of an smtp check (`smtp://host[:port]` or
/// `smtps://host[:port]`, nothing after the port) and its
/// `require_starttls`.
pub(super) fn smtp(
    cx: &mut Cx<'_>,
    d: &Decoded<RawCheck>,
    context: &str,
) -> Option<(SmtpCheck, Url)> {
    let raw = &d.value;
    let value = cx.required(d, "url", raw.url.as_ref(), context)?;
    let url = cx.url_with_scheme("url", value, "smtp:// (or smtps://)")?;
    let implicit = match url.scheme() {
        "smtp" => false,
        "smtps" => true,
        other => {
            let message = format!(
                "must be an smtp:// (STARTTLS) or smtps:// (TLS from the first byte) URL, not {other:?}"
            );
            cx.error(&value.span(), "url", message);
            return None;
        }
    };
    let bare = matches!(url.path(), "" | "/")
        && url.query().is_none()
        && url.username().is_empty()
        && url.password().is_none();
    if !bare {
        let message = "an smtp check's url is only scheme://host[:port]";
        cx.error(&value.span(), "url", message);
        return None;
    }
    let tls = match (implicit, &raw.require_starttls) {
        (true, Some(flag)) => {
            let message = "smtps:// is TLS from the first byte: there is no STARTTLS to require";
            cx.error(&flag.span(), "require_starttls", message);
            return None;
        }
        (true, None) => SmtpTlsMode::Implicit,
        (false, flag) => SmtpTlsMode::Starttls {
            required: flag.as_ref().is_none_or(|f| *f.get_ref()),
        },
    };
    let port = url.port().unwrap_or(if implicit { 465 } else { 25 });
    let host = host_of(&url)?;
    Some((SmtpCheck { host, port, tls }, url))
}

/// The check `[smtp] watch` adds for the relay vigie mails through: its
/// STARTTLS or SMTPS, its chain judged as any check's, under `[smtp]`'s
/// own trust (`ca_file`). A clear-text relay (`tls = "none"`, loopback
/// only) has no certificate to watch, so it gets none.
///
/// It takes what any check takes from the config when it does not say:
/// `default_timeout` and the top-level `acme_directory`.
pub(crate) fn relay_check(
    smtp: &SmtpConfig,
    timeout: Duration,
    acme_directory: Option<&Url>,
) -> Option<Check> {
    if !smtp.watch {
        return None;
    }
    let (scheme, tls) = match smtp.tls {
        SmtpTls::Starttls => ("smtp", SmtpTlsMode::Starttls { required: true }),
        SmtpTls::Tls => ("smtps", SmtpTlsMode::Implicit),
        SmtpTls::None => return None,
    };
    let host = match smtp.host.parse::<std::net::Ipv6Addr>() {
        Ok(_) => format!("[{}]", smtp.host),
        Err(_) => smtp.host.clone(),
    };
    let url = Url::parse(&format!("{scheme}://{host}:{}", smtp.port)).ok()?;
    Some(Check {
        name: RELAY_CHECK.to_string(),
        resolve: None,
        every: Cadence::Every(RELAY_EVERY),
        timeout,
        labels: BTreeMap::from([("vigie".to_string(), "smtp-relay".to_string())]),
        tls: TlsExpect {
            ca_file: smtp.ca_file.clone(),
            acme_directory: acme_directory.cloned(),
            ..TlsExpect::default()
        },
        alert: AlertOverrides::default(),
        kind: CheckKind::Smtp(SmtpCheck {
            host: host_of(&url)?,
            port: smtp.port,
            tls,
        }),
        url,
    })
}
