//! The bounds of every duration key, in one place: resolution takes its
//! minima and maxima from here, and `docs/configuration.md` and `checks/README.md` list
//! the same values next to each key.
//!
//! The minima rule out values that break the daemon (a zero timeout fails
//! every probe). The maxima rule out values no one means, "400y" for
//! "400d", and keep every deadline the daemon computes from them (`now +
//! repeat`, the end of a maintenance window, the retention cutoff) well
//! inside the calendar: `time` panics past the year 9999, and before these
//! bounds `vigie validate` accepted values that made the daemon do that.
//! Each maximum is far above any sensible setting; its comment says why it
//! is where it is.

use std::time::Duration;

const MIB: usize = 1024 * 1024;

/// `ca_cache_size`: the CRLs and ARI answers kept for every check. Below a
/// mebibyte no real CRL fits (and one that does not fit is fetched again
/// by every probe); past a gibibyte the cache outweighs the daemon it
/// serves many times over, on the small VM vigie runs on.
pub const MIN_CA_CACHE_SIZE: usize = MIB;
/// `ca_cache_size` when unset: a big CA's unsharded CRL (10 MiB, the most
/// fetched) indexes to about twice that, with room for dozens of shards.
pub const DEFAULT_CA_CACHE_SIZE: usize = 64 * MIB;
pub const MAX_CA_CACHE_SIZE: usize = 1024 * MIB;

/// humantime's year (365.25 days), so that `"1y"` is exactly the maximum
/// and messages read "1year".
const YEAR: Duration = Duration::from_secs(31_557_600);
const DAY: Duration = Duration::from_secs(86_400);

/// `[check.tls] ari_grace`: how long after the CA's renewal window ended
/// a still-served certificate is only a warning. Past a month the
/// certificate has usually expired anyway.
pub const MAX_ARI_GRACE: Duration = Duration::from_secs(30 * 86_400);

/// `[check.rdap] query_every`: registries rate-limit RDAP without saying
/// how much, and a registration changes over days. Below an hour a
/// registry sees vigie as a scraper; past a week a hold or a lapse goes
/// unseen for too long (the memory of answers keeps a month).
pub const MIN_RDAP_QUERY_EVERY: Duration = Duration::from_secs(3600);
pub const MAX_RDAP_QUERY_EVERY: Duration = Duration::from_secs(7 * 86_400);

/// Shortest `every` and interval: below a second a check is a load test.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// Shortest timeout-like duration: it only rules out zero, which would fail
/// every probe.
pub(crate) const MIN_POSITIVE: Duration = Duration::from_millis(1);

/// `default_timeout`, a check's `timeout` and `expect.max_response_time`.
/// A probe is one lookup, connection, handshake and request (with its
/// redirects); one still running after ten minutes is hung, not slow. The
/// blind-monitor gate also waits up to twice `default_timeout` for a canary
/// round before judging network failures, so a longer timeout delays pages.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// A check's `every`. An `every` check's runs are spread over its period
/// (jitter), so its first run after a start or reload can come up to one
/// period later: past a day, a new check would go unprobed for days.
/// Rarer runs are what `schedule` (cron) is for.
pub const MAX_EVERY: Duration = DAY;

/// `[alerting] repeat` and `[check.alert] repeat`: a reminder rarer than
/// yearly is none; `"0s"` in a check turns reminders off instead.
pub const MAX_REPEAT: Duration = YEAR;

/// `[alerting] group_window`. Every page waits out the window, so useful
/// values are seconds; the bound only keeps the wait finite and in the
/// calendar.
pub const MAX_GROUP_WINDOW: Duration = YEAR;

/// `[[maintenance]] duration`, and every silence (`MAX_SILENCE` in
/// `alert/silence.rs` is this value): a hold on pages longer than a year is
/// a check that should not page at all, `page = false`.
pub const MAX_HOLD: Duration = YEAR;

/// `[history] retention` and `rollup_retention`: ten years of history is
/// more than any certificate or incident needs, and the store's keys stay
/// far from the calendar's ends. (`rollup_retention` must also be at least
/// `retention`, checked in `resolve`.)
pub const MAX_RETENTION: Duration = Duration::from_secs(10 * 31_557_600);

/// `[replication] interval`: the replica is the copy that survives losing
/// this machine; shipping less often than daily loses more than a day of
/// history with it, and `/healthz` only calls replication behind after
/// three intervals.
pub const MAX_REPLICATION_INTERVAL: Duration = DAY;

/// `[heartbeat] interval`: the dead-man's switch is how anyone learns that
/// vigie itself died; pinging less often than daily leaves a dead monitor
/// unnoticed for more than a day.
pub const MAX_HEARTBEAT_INTERVAL: Duration = DAY;

/// A cors check's `min_max_age`: browsers cap `Access-Control-Max-Age` at
/// a day (Firefox; Chromium at two hours), so requiring more asserts a
/// cache no browser keeps.
pub const MAX_MIN_MAX_AGE: Duration = DAY;

/// The shortest `[api] request_timeout`: below a second a TLS handshake
/// over a slow link fails.
pub(crate) const MIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(1);

/// `[api] request_timeout`: a request head and body of a few KiB take
/// milliseconds on any network an API is opened to; past a minute a slow
/// client holds a connection slot for nothing.
pub const MAX_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// `[api] session_ttl`: a browser session is a credential left in a cookie
/// jar; past a month it outlives any reason to keep it.
pub const MAX_SESSION_TTL: Duration = Duration::from_secs(30 * 86_400);
/// `[[notify]] timeout`: a push slower than a minute is retried.
pub const MAX_PUSH_TIMEOUT: Duration = Duration::from_secs(60);
/// `[api] socket`: `sun_path` holds 108 bytes, the last one a NUL.
pub const MAX_SOCKET_PATH: usize = 107;
/// `[[notify]] min_backoff` and `breaker_pause`: more often than every
/// second is hammering an endpoint that is down.
pub const MIN_PUSH_BACKOFF: Duration = Duration::from_secs(1);
/// `[[notify]] min_backoff`, `max_backoff` and `breaker_pause`: a push
/// tried less often than daily is given up long before its next try.
pub const MAX_PUSH_BACKOFF: Duration = DAY;
/// `[[notify]] give_up_after`: from a minute (a test, a lab) to a month,
/// past which a page is history.
pub const MIN_PUSH_GIVE_UP: Duration = Duration::from_secs(60);
pub const MAX_PUSH_GIVE_UP: Duration = Duration::from_secs(30 * 86_400);

/// The shortest `[api] token_file` accepted when `listen` is not
/// loopback: 32 bytes is 256 bits when drawn at random (`openssl rand -hex
/// 32` writes 64 characters), beyond guessing at any request rate; a
/// loopback API is only reachable from this machine, so any token will do
/// there.
pub const MIN_REMOTE_TOKEN_BYTES: usize = 32;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maxima_read_as_the_documentation_writes_them() {
        let text = |d: Duration| humantime::format_duration(d).to_string();
        assert_eq!(text(MAX_TIMEOUT), "10m");
        assert_eq!(text(MAX_EVERY), "1day");
        assert_eq!(text(MAX_REPEAT), "1year");
        assert_eq!(text(MAX_GROUP_WINDOW), "1year");
        assert_eq!(text(MAX_HOLD), "1year");
        assert_eq!(text(MAX_RETENTION), "10years");
        assert_eq!(text(MAX_REPLICATION_INTERVAL), "1day");
        assert_eq!(text(MAX_HEARTBEAT_INTERVAL), "1day");
        assert_eq!(text(MAX_MIN_MAX_AGE), "1day");
        assert_eq!(text(MAX_REQUEST_TIMEOUT), "1m");
        assert_eq!(text(MAX_SESSION_TTL), "30days");
        assert_eq!(humantime::parse_duration("1y").ok(), Some(MAX_HOLD));
        assert_eq!(humantime::parse_duration("10y").ok(), Some(MAX_RETENTION));
    }
}
