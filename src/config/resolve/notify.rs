//! `[[notify]]` and `[[route]]`: the push channels, each kind's keys, the
//! secrets they need (read now, so a malformed one is a validation error
//! rather than a first page that fails), and routes that name only
//! channels that exist and leave none unreached.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use toml::Spanned;
use url::{Host, Url};

use super::check::is_name_char;
use super::cx::Cx;
use crate::config::channels::{
    address_refusal, read_secret, webhook_secret, Backoff, Channel, ChannelKind, Notify,
    NotifyEvent, NtfyAuth, NtfyPriorities, Route, MAIL, PAGERDUTY_EVENTS_URL,
};
use crate::config::decode::Decoded;
use crate::config::limits::{
    MAX_PUSH_BACKOFF, MAX_PUSH_GIVE_UP, MAX_PUSH_TIMEOUT, MIN_POSITIVE, MIN_PUSH_BACKOFF,
    MIN_PUSH_GIVE_UP,
};
use crate::config::raw::{RawNotify, RawRoute};

/// A push that takes longer than this is retried: long enough for a slow
/// webhook receiver, short enough that a hung one is noticed.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// ntfy.sh's own limit is a burst of 60 then one every 5 s per visitor; 6
/// a minute keeps a phone readable during an outage of many checks.
const DEFAULT_NTFY_RATE: u32 = 6;
/// Webhooks, PagerDuty and Slack: one a second (Slack's documented limit
/// for incoming webhooks).
const DEFAULT_RATE: u32 = 60;
const MAX_RATE: u32 = 6000;
const MAX_NAME: usize = 64;

/// The keys each kind takes besides `name`, `kind`, `url`,
/// `allow_private`, `timeout` and `rate_limit`.
const KIND_KEYS: [(&str, &[&str]); 4] = [
    ("webhook", &["secret_file", "secret_credential", "headers"]),
    (
        "ntfy",
        &[
            "token_file",
            "token_credential",
            "user",
            "password_file",
            "password_credential",
            "priority",
            "priority_env",
            "tags",
        ],
    ),
    ("pagerduty", &["routing_key_file", "routing_key_credential"]),
    ("slack", &[]),
];

/// Headers vigie sets itself on a webhook: `headers` may not replace them.
const OWN_HEADERS: [&str; 5] = [
    "content-type",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "content-length",
];

/// Every `[[notify]]` and `[[route]]`.
pub(super) fn notify(
    cx: &mut Cx<'_>,
    channels: &[Decoded<RawNotify>],
    routes: &[Decoded<RawRoute>],
) -> Notify {
    let mut resolved: Vec<Channel> = Vec::new();
    for (i, d) in channels.iter().enumerate() {
        let mut cx = cx.section(&format!("notify[{i}]"));
        if let Some(channel) = channel(&mut cx, d) {
            if resolved.iter().any(|c| c.name == channel.name) {
                let span = d.value.name.as_ref().map_or(d.span.clone(), |n| n.span());
                let message = format!(
                    "a channel named {:?} is defined earlier; channel names are unique",
                    channel.name
                );
                cx.error(&span, "name", message);
                continue;
            }
            resolved.push(channel);
        }
    }
    let names: Vec<&str> = resolved.iter().map(|c| c.name.as_str()).collect();
    let raw_routes = routes;
    let routes: Vec<Route> = raw_routes
        .iter()
        .enumerate()
        .filter_map(|(i, d)| route(&mut cx.section(&format!("route[{i}]")), d, &names))
        .collect();
    if !raw_routes.is_empty() {
        for (i, d) in channels.iter().enumerate() {
            let Some(name) = d.value.name.as_ref() else {
                continue;
            };
            let reached = routes
                .iter()
                .any(|r| r.notify.iter().any(|n| n == name.get_ref()));
            if !reached && names.contains(&name.get_ref().as_str()) {
                let message = format!(
                    "no [[route]] sends anything to {:?}: add it to a route's `notify`, or remove the channel",
                    name.get_ref()
                );
                cx.section(&format!("notify[{i}]"))
                    .error(&name.span(), "name", message);
            }
        }
    }
    Notify {
        channels: resolved,
        routes,
    }
}

fn channel(cx: &mut Cx<'_>, d: &Decoded<RawNotify>) -> Option<Channel> {
    let raw = &d.value;
    let name = cx.required(d, "name", raw.name.as_ref(), "");
    let kind = cx.required(
        d,
        "kind",
        raw.kind.as_ref(),
        ": one of \"webhook\", \"ntfy\", \"pagerduty\", \"slack\"",
    );
    let kind_text = kind.map(|k| k.get_ref().as_str());
    // PagerDuty's Events API has one address; the others have none.
    let url = match (kind_text, raw.url.as_ref()) {
        (Some("pagerduty"), None) => None,
        (_, url) => cx.required(d, "url", url, ""),
    };
    let name = name.and_then(|n| channel_name(cx, n));
    let Some(keys) = kind_text.and_then(|k| KIND_KEYS.iter().find(|(name, _)| *name == k)) else {
        if let Some(kind) = kind {
            let message = format!(
                "unknown kind {:?}: one of \"webhook\", \"ntfy\", \"pagerduty\", \"slack\"",
                kind.get_ref()
            );
            cx.error(&kind.span(), "kind", message);
        }
        return None;
    };
    foreign_keys(cx, raw, keys.0, keys.1);
    let allow_private = raw.allow_private.as_ref().is_some_and(|a| *a.get_ref());
    let url = match (url, keys.0) {
        (None, "pagerduty") => Url::parse(PAGERDUTY_EVENTS_URL).ok(),
        (url, _) => url.and_then(|u| channel_url(cx, u, allow_private)),
    };
    let timeout = cx.duration_or(
        "timeout",
        raw.timeout.as_ref(),
        DEFAULT_TIMEOUT,
        MIN_POSITIVE,
        MAX_PUSH_TIMEOUT,
    );
    let default_rate = match keys.0 {
        "ntfy" => DEFAULT_NTFY_RATE,
        _ => DEFAULT_RATE,
    };
    let rate_limit = match raw.rate_limit.as_ref() {
        None => default_rate,
        Some(rate) if (1..=MAX_RATE).contains(rate.get_ref()) => *rate.get_ref(),
        Some(rate) => {
            let message = format!(
                "{} is not from 1 to {MAX_RATE} requests a minute",
                rate.get_ref()
            );
            cx.error(&rate.span(), "rate_limit", message);
            default_rate
        }
    };
    let backoff = backoff(cx, raw);
    let kind = match keys.0 {
        "webhook" => webhook(cx, d)?,
        "ntfy" => ntfy(cx, d, url.as_ref())?,
        "pagerduty" => pagerduty(cx, d)?,
        _ => ChannelKind::Slack,
    };
    Some(Channel {
        name: name?,
        url: url?,
        allow_private,
        timeout,
        rate_limit,
        backoff,
        kind,
    })
}

/// `min_backoff`, `max_backoff`, `give_up_after` and `breaker_pause`, the
/// waits in order: a first wait or pause longer than the longest is
/// refused (and the config with it) rather than silently cut.
fn backoff(cx: &mut Cx<'_>, raw: &RawNotify) -> Backoff {
    let default = Backoff::DEFAULT;
    let (low, high) = (MIN_PUSH_BACKOFF, MAX_PUSH_BACKOFF);
    let backoff = Backoff {
        min: cx.duration_or(
            "min_backoff",
            raw.min_backoff.as_ref(),
            default.min,
            low,
            high,
        ),
        max: cx.duration_or(
            "max_backoff",
            raw.max_backoff.as_ref(),
            default.max,
            low,
            high,
        ),
        give_up_after: cx.duration_or(
            "give_up_after",
            raw.give_up_after.as_ref(),
            default.give_up_after,
            MIN_PUSH_GIVE_UP,
            MAX_PUSH_GIVE_UP,
        ),
        breaker_pause: cx.duration_or(
            "breaker_pause",
            raw.breaker_pause.as_ref(),
            default.breaker_pause,
            low,
            high,
        ),
    };
    let longest = humantime::format_duration(backoff.max);
    for (key, value, wait) in [
        ("min_backoff", &raw.min_backoff, backoff.min),
        ("breaker_pause", &raw.breaker_pause, backoff.breaker_pause),
    ] {
        if wait <= backoff.max {
            continue;
        }
        let message = format!(
            "{} is longer than `max_backoff` ({longest}), the longest wait: shorten it or raise `max_backoff`",
            humantime::format_duration(wait)
        );
        match (value, &raw.max_backoff) {
            (Some(value), _) => cx.error(&value.span(), key, message),
            (None, Some(max)) => cx.error(&max.span(), key, message),
            (None, None) => {}
        }
    }
    backoff
}

/// Channel names are how routes, logs, metrics and mails name a channel.
fn channel_name(cx: &mut Cx<'_>, name: &Spanned<String>) -> Option<String> {
    let text = name.get_ref();
    let problem = if text == MAIL {
        Some(format!(
            "{MAIL:?} is the mail of [alerting]; name this channel otherwise"
        ))
    } else if text.is_empty() || text.len() > MAX_NAME || !text.chars().all(is_name_char) {
        Some(format!(
            "{text:?} is not a channel name: 1 to {MAX_NAME} of a-z, 0-9, '.', '_', '-'"
        ))
    } else {
        None
    };
    match problem {
        Some(problem) => {
            cx.error(&name.span(), "name", problem);
            None
        }
        None => Some(text.clone()),
    }
}

/// Keys of another kind (a `routing_key_file` on a webhook) are refused:
/// they would be silently ignored otherwise.
fn foreign_keys(cx: &mut Cx<'_>, raw: &RawNotify, kind: &str, own: &[&str]) {
    let present: [(&str, Option<std::ops::Range<usize>>); 13] = [
        ("secret_file", raw.secret_file.as_ref().map(Spanned::span)),
        (
            "secret_credential",
            raw.secret_credential.as_ref().map(Spanned::span),
        ),
        (
            "headers",
            raw.headers
                .as_ref()
                .and_then(|h| h.keys().next())
                .map(Spanned::span),
        ),
        ("token_file", raw.token_file.as_ref().map(Spanned::span)),
        (
            "token_credential",
            raw.token_credential.as_ref().map(Spanned::span),
        ),
        ("user", raw.user.as_ref().map(Spanned::span)),
        (
            "password_file",
            raw.password_file.as_ref().map(Spanned::span),
        ),
        (
            "password_credential",
            raw.password_credential.as_ref().map(Spanned::span),
        ),
        (
            "priority",
            raw.priority
                .as_ref()
                .and_then(|h| h.keys().next())
                .map(Spanned::span),
        ),
        (
            "priority_env",
            raw.priority_env
                .as_ref()
                .and_then(|h| h.keys().next())
                .map(Spanned::span),
        ),
        (
            "tags",
            raw.tags.as_ref().and_then(|t| t.first()).map(Spanned::span),
        ),
        (
            "routing_key_file",
            raw.routing_key_file.as_ref().map(Spanned::span),
        ),
        (
            "routing_key_credential",
            raw.routing_key_credential.as_ref().map(Spanned::span),
        ),
    ];
    for (key, span) in present {
        if let Some(span) = span {
            if !own.contains(&key) {
                cx.error(&span, key, format!("not a key of a {kind} channel"));
            }
        }
    }
}

/// An http(s) URL; https unless the host is loopback (a secret or a page
/// would otherwise cross the network in clear). A host written as an IP
/// address is judged now: a metadata address is refused always, another
/// non-global one without `allow_private`. Names are judged when they are
/// resolved, at each delivery.
fn channel_url(cx: &mut Cx<'_>, value: &Spanned<String>, allow_private: bool) -> Option<Url> {
    let url = cx.web_url("url", value)?;
    let ip: Option<IpAddr> = match url.host() {
        Some(Host::Ipv4(v4)) => Some(v4.into()),
        Some(Host::Ipv6(v6)) => Some(v6.into()),
        _ => None,
    };
    let loopback = ip.is_some_and(|ip| ip.is_loopback())
        || url
            .host_str()
            .is_some_and(|h| h.eq_ignore_ascii_case("localhost"));
    if url.scheme() == "http" && !loopback {
        cx.error(
            &value.span(),
            "url",
            "must be https:// unless the host is loopback: pushes carry what is down and the channel's secret",
        );
        return None;
    }
    if let Some(problem) = ip.and_then(|ip| address_refusal(ip, allow_private)) {
        cx.error(&value.span(), "url", problem);
        return None;
    }
    Some(url)
}

fn webhook(cx: &mut Cx<'_>, d: &Decoded<RawNotify>) -> Option<ChannelKind> {
    let raw = &d.value;
    let secret_file = cx.secret(
        "secret",
        raw.secret_file.as_ref(),
        raw.secret_credential.as_ref(),
    );
    let span = raw
        .secret_file
        .as_ref()
        .or(raw.secret_credential.as_ref())
        .map(Spanned::span);
    let Some(span) = span else {
        cx.report(
            &d.span,
            format!(
                "missing key `{}secret_file` (or `secret_credential`): a webhook is signed with a Standard Webhooks secret, `whsec_` + base64; make one with `echo whsec_$(head -c 32 /dev/urandom | base64)`",
                cx.prefix()
            ),
        );
        return None;
    };
    let secret_file = secret_file?;
    let key = if raw.secret_file.is_some() {
        "secret_file"
    } else {
        "secret_credential"
    };
    if let Err(problem) = read_secret(&secret_file).and_then(|s| webhook_secret(&s).map(|_| ())) {
        cx.error(&span, key, problem);
        return None;
    }
    let mut headers = BTreeMap::new();
    for (name, value) in raw.headers.iter().flatten() {
        let lower = name.get_ref().to_ascii_lowercase();
        let key = format!("headers.{}", name.get_ref());
        if OWN_HEADERS.contains(&lower.as_str()) {
            cx.error(&name.span(), &key, "vigie sets this header itself");
            continue;
        }
        if http::HeaderName::from_bytes(lower.as_bytes()).is_err()
            || http::HeaderValue::from_str(value.get_ref()).is_err()
        {
            cx.error(&name.span(), &key, "not a valid HTTP header name and value");
            continue;
        }
        headers.insert(lower, value.get_ref().clone());
    }
    Some(ChannelKind::Webhook {
        secret_file,
        headers,
    })
}

fn ntfy(cx: &mut Cx<'_>, d: &Decoded<RawNotify>, url: Option<&Url>) -> Option<ChannelKind> {
    let raw = &d.value;
    let token = cx.secret(
        "token",
        raw.token_file.as_ref(),
        raw.token_credential.as_ref(),
    );
    let password = cx.secret(
        "password",
        raw.password_file.as_ref(),
        raw.password_credential.as_ref(),
    );
    let token_given = raw.token_file.is_some() || raw.token_credential.is_some();
    let password_given = raw.password_file.is_some() || raw.password_credential.is_some();
    if token_given && (raw.user.is_some() || password_given) {
        let span = raw.user.as_ref().map_or(d.span.clone(), Spanned::span);
        cx.error(
            &span,
            "user",
            "set with a token; sign in one way: a token, or `user` and `password_file`",
        );
        return None;
    }
    let auth = match (token, raw.user.as_ref(), password) {
        (Some(token), None, None) => NtfyAuth::Token(token),
        (None, Some(user), Some(password_file)) => NtfyAuth::Basic {
            user: user.get_ref().clone(),
            password_file,
        },
        (None, None, None) if !token_given && !password_given => NtfyAuth::None,
        (None, Some(user), None) if !password_given => {
            cx.error(
                &user.span(),
                "user",
                "set without `password_file` (or `password_credential`); give both or neither",
            );
            return None;
        }
        (None, None, _) if password_given => {
            let span = raw
                .password_file
                .as_ref()
                .or(raw.password_credential.as_ref())
                .map_or(d.span.clone(), Spanned::span);
            cx.error(
                &span,
                "password_file",
                "set without `user`; give both or neither",
            );
            return None;
        }
        // A secret that was given but is unusable was reported.
        _ => return None,
    };
    if auth == NtfyAuth::None
        && url
            .and_then(Url::host_str)
            .is_some_and(|h| h.eq_ignore_ascii_case("ntfy.sh"))
    {
        let span = raw.url.as_ref().map_or(d.span.clone(), Spanned::span);
        cx.warn(
            &span,
            "url",
            "a topic on the public ntfy.sh without a token: anyone who guesses the topic name reads what is down, and can post to it; reserve the topic and set token_file",
        );
    }
    let mut priority = NtfyPriorities::defaults();
    for (event, value) in raw.priority.iter().flatten() {
        if let Some((event, level)) =
            priority_entry(cx, &format!("priority.{}", event.get_ref()), event, value)
        {
            priority.by_event.insert(event, level);
        }
    }
    for (env, events) in raw.priority_env.iter().flatten() {
        for (event, value) in events {
            let key = format!("priority_env.{}.{}", env.get_ref(), event.get_ref());
            if let Some((event, level)) = priority_entry(cx, &key, event, value) {
                priority
                    .by_env
                    .entry(env.get_ref().clone())
                    .or_default()
                    .insert(event, level);
            }
        }
    }
    let tags = raw
        .tags
        .iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, tag)| {
            let text = tag.get_ref();
            let ok =
                !text.is_empty() && !text.contains(',') && text.chars().all(|c| !c.is_control());
            if !ok {
                cx.error(
                    &tag.span(),
                    &format!("tags[{i}]"),
                    "a tag is a word without commas, e.g. \"warning\"",
                );
            }
            ok.then(|| text.clone())
        })
        .collect();
    Some(ChannelKind::Ntfy {
        auth,
        priority,
        tags,
    })
}

fn priority_entry(
    cx: &mut Cx<'_>,
    key: &str,
    event: &Spanned<String>,
    value: &Spanned<u8>,
) -> Option<(NotifyEvent, u8)> {
    let Some(parsed) = NotifyEvent::parse(event.get_ref()) else {
        let message = format!(
            "{:?} is not an event: one of {}",
            event.get_ref(),
            NotifyEvent::listed()
        );
        cx.error(&event.span(), key, message);
        return None;
    };
    if !(1..=5).contains(value.get_ref()) {
        cx.error(&value.span(), key, "an ntfy priority is 1 (min) to 5 (max)");
        return None;
    }
    Some((parsed, *value.get_ref()))
}

fn pagerduty(cx: &mut Cx<'_>, d: &Decoded<RawNotify>) -> Option<ChannelKind> {
    let raw = &d.value;
    let given = raw
        .routing_key_file
        .as_ref()
        .or(raw.routing_key_credential.as_ref());
    let Some(given) = given else {
        cx.report(
            &d.span,
            format!(
                "missing key `{}routing_key_file` (or `routing_key_credential`): the integration key of a PagerDuty service's Events API v2 integration",
                cx.prefix()
            ),
        );
        return None;
    };
    let key = if raw.routing_key_file.is_some() {
        "routing_key_file"
    } else {
        "routing_key_credential"
    };
    let routing_key_file = cx.secret(
        "routing_key",
        raw.routing_key_file.as_ref(),
        raw.routing_key_credential.as_ref(),
    )?;
    match read_secret(&routing_key_file) {
        Ok(k) if k.len() == 32 && k.chars().all(|c| c.is_ascii_alphanumeric()) => {}
        Ok(k) => {
            let message = format!(
                "{} holds {} characters; a PagerDuty integration key is 32 letters and digits",
                routing_key_file.display(),
                k.chars().count()
            );
            cx.error(&given.span(), key, message);
            return None;
        }
        Err(problem) => {
            cx.error(&given.span(), key, problem);
            return None;
        }
    }
    Some(ChannelKind::PagerDuty { routing_key_file })
}

fn route(cx: &mut Cx<'_>, d: &Decoded<RawRoute>, channels: &[&str]) -> Option<Route> {
    let raw = &d.value;
    let notify = cx.required(
        d,
        "notify",
        raw.notify.as_ref(),
        ": the channels this route's events go to, e.g. [\"mail\"]",
    )?;
    let mut names = Vec::new();
    for (i, name) in notify.get_ref().iter().enumerate() {
        let text = name.get_ref();
        if text != MAIL && !channels.contains(&text.as_str()) {
            let known = std::iter::once(MAIL)
                .chain(channels.iter().copied())
                .map(|n| format!("{n:?}"))
                .collect::<Vec<_>>()
                .join(", ");
            let message = format!("no channel named {text:?}; the channels are {known}");
            cx.error(&name.span(), &format!("notify[{i}]"), message);
            continue;
        }
        if !names.contains(text) {
            names.push(text.clone());
        }
    }
    if notify.get_ref().is_empty() {
        cx.error(
            &notify.span(),
            "notify",
            "an empty list sends nothing: name at least one channel, e.g. [\"mail\"]",
        );
    }
    let equal = raw
        .equal
        .iter()
        .flatten()
        .map(|(k, v)| (k.get_ref().clone(), v.get_ref().clone()))
        .collect();
    let regex = raw
        .match_re
        .iter()
        .flatten()
        .filter_map(|(k, v)| {
            let anchored = toml::Spanned::new(v.span(), format!("^(?:{})$", v.get_ref()));
            cx.regex(&format!("match_re.{}", k.get_ref()), &anchored)
                .map(|re| (k.get_ref().clone(), re))
        })
        .collect();
    let mut events = Vec::new();
    for (i, event) in raw.events.iter().flatten().enumerate() {
        match NotifyEvent::parse(event.get_ref()) {
            Some(e) => events.push(e),
            None => {
                let message = format!(
                    "{:?} is not an event: one of {}",
                    event.get_ref(),
                    NotifyEvent::listed()
                );
                cx.error(&event.span(), &format!("events[{i}]"), message);
            }
        }
    }
    if events.contains(&NotifyEvent::Warn) && names.iter().all(|n| n == MAIL) {
        cx.warn(
            &notify.span(),
            "notify",
            "a warn is never mailed (the daily report lists it): this route sends its warns nowhere; name a push channel to be told",
        );
    }
    if names.is_empty() {
        return None;
    }
    Some(Route {
        equal,
        regex,
        events,
        notify: names,
        and_continue: raw.and_continue.as_ref().is_some_and(|c| *c.get_ref()),
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::Duration;
    use crate::config::channels::{Backoff, ChannelKind, NotifyEvent, NtfyAuth};
    use crate::config::{load_str, Config, ConfigErrors};

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const SITE: &str =
        "[[check]]\nname = \"site\"\nkind = \"http\"\nurl = \"https://example.com/\"\n";

    /// A directory with `checks/`, `hook.secret`, `ntfy.token` and
    /// `pd.key` (mode 600), and the path of its config.
    fn dir() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("checks")).unwrap();
        std::fs::write(dir.path().join("checks/site.toml"), SITE).unwrap();
        for (name, text) in [
            ("hook.secret", format!("{SECRET}\n")),
            ("bad.secret", "not-a-secret\n".to_string()),
            (
                "ntfy.token",
                "tk_abcdefghijklmnopqrstuvwxyz012\n".to_string(),
            ),
            ("pd.key", "0123456789abcdef0123456789abcdef\n".to_string()),
            ("short.key", "0123\n".to_string()),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let path = dir.path().join("config.toml");
        (dir, path)
    }

    fn load(path: &std::path::Path, notify: &str) -> Result<Config, ConfigErrors> {
        let text =
            format!("state_dir = \"state\"\n[alerting]\nto = [\"oncall@example.com\"]\n{notify}");
        load_str(path, &text)
    }

    fn refused(path: &std::path::Path, notify: &str) -> Vec<String> {
        let errors = load(path, notify).unwrap_err();
        errors.0.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn every_kind_loads_with_its_defaults() {
        let (_dir, path) = dir();
        let config = load(
            &path,
            "[[notify]]\nname = \"hooks\"\nkind = \"webhook\"\nurl = \"https://hooks.example.net/vigie\"\nsecret_file = \"hook.secret\"\nheaders = { X-Team = \"ops\" }\n\
             [[notify]]\nname = \"phone\"\nkind = \"ntfy\"\nurl = \"https://ntfy.example.net/vigie\"\ntoken_file = \"ntfy.token\"\npriority = { resolved = 1 }\n\
             [[notify]]\nname = \"pager\"\nkind = \"pagerduty\"\nrouting_key_file = \"pd.key\"\n\
             [[notify]]\nname = \"chat\"\nkind = \"slack\"\nurl = \"https://hooks.slack.com/services/T0/B0/X0\"\n",
        )
        .unwrap();
        let channels = &config.notify.channels;
        let kinds: Vec<&str> = channels.iter().map(|c| c.kind.as_str()).collect();
        assert_eq!(kinds, ["webhook", "ntfy", "pagerduty", "slack"]);
        assert_eq!(channels[2].url.as_str(), super::PAGERDUTY_EVENTS_URL);
        assert_eq!(channels[1].rate_limit, 6);
        assert_eq!(channels[0].rate_limit, 60);
        assert!(channels.iter().all(|c| c.backoff == Backoff::DEFAULT));
        let ChannelKind::Webhook { headers, .. } = &channels[0].kind else {
            panic!()
        };
        assert_eq!(headers.get("x-team").map(String::as_str), Some("ops"));
        let ChannelKind::Ntfy { auth, priority, .. } = &channels[1].kind else {
            panic!()
        };
        assert!(matches!(auth, NtfyAuth::Token(_)));
        assert_eq!(priority.of(NotifyEvent::Resolved, Some("prod")), 1);
        assert_eq!(priority.of(NotifyEvent::Down, Some("prod")), 5);
        assert_eq!(priority.of(NotifyEvent::Down, Some("staging")), 3);
        assert_eq!(priority.of(NotifyEvent::Down, None), 4);
        for env in [Some("prod"), Some("staging"), None] {
            assert_eq!(priority.of(NotifyEvent::Warn, env), 3, "{env:?}");
        }
        assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    }

    #[test]
    fn routes_name_only_channels_that_exist_and_reach_every_one() {
        let (_dir, path) = dir();
        let shown = path.display().to_string();
        let phone = "[[notify]]\nname = \"phone\"\nkind = \"ntfy\"\nurl = \"https://ntfy.example.net/vigie\"\ntoken_file = \"ntfy.token\"\n";
        assert_eq!(
            refused(&path, &format!("{phone}[[route]]\nnotify = [\"pager\"]\n")),
            [
                format!("{shown}:5:8: `notify[0].name`: no [[route]] sends anything to \"phone\": add it to a route's `notify`, or remove the channel"),
                format!("{shown}:10:11: `route[0].notify[0]`: no channel named \"pager\"; the channels are \"mail\", \"phone\""),
            ]
        );
        let unknown_event = refused(
            &path,
            &format!("{phone}[[route]]\nevents = [\"flap\"]\nnotify = [\"phone\"]\n"),
        );
        assert_eq!(
            unknown_event,
            [format!("{shown}:10:11: `route[0].events[0]`: \"flap\" is not an event: one of \"down\", \"warn\", \"reminder\", \"resolved\"")]
        );
        let warn = load(
            &path,
            &format!("{phone}[[route]]\nevents = [\"down\", \"warn\"]\nnotify = [\"phone\"]\n"),
        )
        .unwrap();
        assert_eq!(
            warn.notify.routes[0].events,
            [NotifyEvent::Down, NotifyEvent::Warn]
        );
        assert!(warn.warnings.is_empty(), "{:?}", warn.warnings);
        let mailed = load(
            &path,
            &format!("{phone}[[route]]\nnotify = [\"phone\"]\n[[route]]\nevents = [\"warn\"]\nnotify = [\"mail\"]\n"),
        )
        .unwrap();
        let said: Vec<String> = mailed.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains("a warn is never mailed"), "{said:?}");
        let bad_regex = refused(
            &path,
            &format!("{phone}[[route]]\nmatch_re = {{ env = \"(\" }}\nnotify = [\"phone\"]\n"),
        );
        assert!(
            bad_regex[0].contains("`route[0].match_re.env`: invalid regex"),
            "{bad_regex:?}"
        );
        // With no route at all, every channel gets every event.
        assert!(load(&path, phone).is_ok());
    }

    #[test]
    fn secrets_are_checked_when_the_config_loads() {
        let (_dir, path) = dir();
        let hook = |secret: &str| {
            format!("[[notify]]\nname = \"hooks\"\nkind = \"webhook\"\nurl = \"https://hooks.example.net/\"\nsecret_file = \"{secret}\"\n")
        };
        let bad = refused(&path, &hook("bad.secret"));
        assert!(
            bad[0].contains("`notify[0].secret_file`: the secret must start with `whsec_`"),
            "{bad:?}"
        );
        let missing = refused(&path, "[[notify]]\nname = \"hooks\"\nkind = \"webhook\"\nurl = \"https://hooks.example.net/\"\n");
        assert!(
            missing[0].contains("missing key `notify[0].secret_file` (or `secret_credential`)"),
            "{missing:?}"
        );
        let short = refused(&path, "[[notify]]\nname = \"pager\"\nkind = \"pagerduty\"\nrouting_key_file = \"short.key\"\n");
        assert!(
            short[0].contains(
                "holds 4 characters; a PagerDuty integration key is 32 letters and digits"
            ),
            "{short:?}"
        );
    }

    #[test]
    fn addresses_schemes_and_foreign_keys_are_refused_with_the_fix() {
        let (_dir, path) = dir();
        let slack = |url: &str, extra: &str| {
            format!("[[notify]]\nname = \"chat\"\nkind = \"slack\"\nurl = \"{url}\"\n{extra}")
        };
        let metadata = refused(
            &path,
            &slack("https://169.254.169.254/latest", "allow_private = true\n"),
        );
        assert!(metadata[0].contains("169.254.169.254 is a cloud instance metadata address: a channel is never sent there"), "{metadata:?}");
        let private = refused(&path, &slack("https://10.0.0.5/hook", ""));
        assert!(
            private[0].contains("set allow_private = true on the channel"),
            "{private:?}"
        );
        assert!(load(
            &path,
            &slack("https://10.0.0.5/hook", "allow_private = true\n")
        )
        .is_ok());
        let clear = refused(&path, &slack("http://hooks.example.net/", ""));
        assert!(
            clear[0].contains("must be https:// unless the host is loopback"),
            "{clear:?}"
        );
        let foreign = refused(
            &path,
            &slack(
                "https://hooks.slack.com/x",
                "routing_key_file = \"pd.key\"\n",
            ),
        );
        assert!(
            foreign[0].contains("`notify[0].routing_key_file`: not a key of a slack channel"),
            "{foreign:?}"
        );
        let mail = refused(
            &path,
            "[[notify]]\nname = \"mail\"\nkind = \"slack\"\nurl = \"https://hooks.slack.com/x\"\n",
        );
        assert!(
            mail[0].contains("\"mail\" is the mail of [alerting]"),
            "{mail:?}"
        );
        let twice = refused(
            &path,
            &format!(
                "{}{}",
                slack("https://a.example/", ""),
                slack("https://b.example/", "")
            ),
        );
        assert!(
            twice[0].contains("a channel named \"chat\" is defined earlier"),
            "{twice:?}"
        );
    }

    #[test]
    fn backoffs_are_read_and_a_first_wait_past_the_longest_is_refused() {
        let (_dir, path) = dir();
        let slack = |extra: &str| {
            format!("[[notify]]\nname = \"chat\"\nkind = \"slack\"\nurl = \"https://hooks.slack.com/x\"\n{extra}")
        };
        let config = load(
            &path,
            &slack("min_backoff = \"2s\"\nmax_backoff = \"1m\"\ngive_up_after = \"2h\"\nbreaker_pause = \"10s\"\n"),
        )
        .unwrap();
        let backoff = config.notify.channels[0].backoff;
        let secs = |d: Duration| d.as_secs();
        assert_eq!(
            (
                secs(backoff.min),
                secs(backoff.max),
                secs(backoff.give_up_after),
                secs(backoff.breaker_pause)
            ),
            (2, 60, 7200, 10)
        );
        let past = refused(&path, &slack("max_backoff = \"10s\"\n"));
        assert!(
            past[0].contains("`notify[0].breaker_pause`: 30s is longer than `max_backoff` (10s), the longest wait: shorten it or raise `max_backoff`"),
            "{past:?}"
        );
        let past = refused(&path, &slack("min_backoff = \"20m\"\n"));
        assert!(
            past[0].contains("`notify[0].min_backoff`: 20m is longer than `max_backoff` (10m)"),
            "{past:?}"
        );
        let short = refused(&path, &slack("min_backoff = \"100ms\"\n"));
        assert!(
            short[0]
                .contains("`notify[0].min_backoff`: \"100ms\" is shorter than the minimum of 1s"),
            "{short:?}"
        );
        let long = refused(&path, &slack("give_up_after = \"90d\"\n"));
        assert!(
            long[0].contains(
                "`notify[0].give_up_after`: \"90d\" is longer than the maximum of 30days"
            ),
            "{long:?}"
        );
    }

    #[test]
    fn the_public_ntfy_sh_without_a_token_is_a_warning() {
        let (_dir, path) = dir();
        let config = load(
            &path,
            "[[notify]]\nname = \"phone\"\nkind = \"ntfy\"\nurl = \"https://ntfy.sh/my-vigie\"\n",
        )
        .unwrap();
        let warnings: Vec<String> = config.warnings.iter().map(ToString::to_string).collect();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("a topic on the public ntfy.sh without a token"),
            "{warnings:?}"
        );
    }
}
