//! `GET /api/v1/history/{name}?since=24h[&limit=N][&after=MILLIS]`: the
//! stored results of one check, oldest first, streamed.
//!
//! The answer is written [`CHUNK`] results at a time as the client reads
//! it, each page read from the store only when the previous one has left,
//! so its size never sits in the daemon's memory: a result can carry tens
//! of kilobytes of certificate facts, and a month of a 30 s check is
//! 90,000 results. Without `limit`, `since` may reach back at most
//! [`MAX_UNPAGED_WINDOW`]; further back, the client pages: `limit` results
//! at most (up to [`MAX_PAGE`]), and when more remain the answer carries
//! `next_after`, the unix milliseconds of its last result, which the next
//! request passes as `after`.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::reply::error;
use super::ApiState;
use crate::outcome::Outcome;
use crate::store::Store;

/// The window when the client names none.
pub const DEFAULT_HISTORY_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// The longest `since` answered without `limit`: a month covers every
/// incident review and certificate renewal window; longer histories are
/// paged.
pub const MAX_UNPAGED_WINDOW: Duration = Duration::from_secs(31 * 86_400);

/// The largest `limit`.
pub const MAX_PAGE: usize = 10_000;

/// Results read from the store and written out at a time: the most the
/// answer holds in memory (64 results of ~56 KB, the worst seen, are
/// 3.5 MiB).
const CHUNK: usize = 64;

/// The history of one check, in the shape `vigie history --json` prints.
#[derive(Serialize, Deserialize)]
pub struct HistoryView {
    pub name: String,
    #[serde(with = "time::serde::rfc3339")]
    pub since: OffsetDateTime,
    pub outcomes: Vec<Outcome>,
    /// With `limit`, when more results remain: pass it as `after` for the
    /// next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after: Option<u64>,
}

#[derive(Deserialize)]
pub(super) struct HistoryQuery {
    since: Option<String>,
    limit: Option<String>,
    after: Option<String>,
}

/// A history request, checked.
#[derive(Debug, PartialEq, Eq)]
struct Window {
    since: OffsetDateTime,
    /// The first instant to read: `since`, or just after `after`.
    from: OffsetDateTime,
    limit: Option<usize>,
}

impl Window {
    /// The query's meaning at `now`, or the message of a 400.
    fn parse(query: &HistoryQuery, now: OffsetDateTime) -> Result<Window, String> {
        let window = match query.since.as_deref().map(humantime::parse_duration) {
            None => DEFAULT_HISTORY_WINDOW,
            Some(Ok(window)) => window,
            Some(Err(err)) => return Err(format!("since: {err} (a duration such as \"24h\")")),
        };
        let limit = match query.limit.as_deref().map(str::parse::<usize>) {
            None => None,
            Some(Ok(n)) if (1..=MAX_PAGE).contains(&n) => Some(n),
            Some(_) => return Err(format!("limit: a number of results from 1 to {MAX_PAGE}")),
        };
        if limit.is_none() && window > MAX_UNPAGED_WINDOW {
            return Err(format!(
                "since: {} reaches back more than {}d; page through longer windows with `limit` (at most {MAX_PAGE}) and `after` (the `next_after` of the previous page)",
                humantime::format_duration(window),
                MAX_UNPAGED_WINDOW.as_secs() / 86_400,
            ));
        }
        let since = crate::clock::since(now, window);
        let from = match query.after.as_deref().map(str::parse::<u64>) {
            None => since,
            Some(Ok(millis)) => after_millis(millis).max(since),
            Some(Err(_)) => {
                return Err(
                    "after: the `next_after` of the previous page (unix milliseconds)".to_string(),
                )
            }
        };
        Ok(Window { since, from, limit })
    }
}

/// The instant just after `millis` since the epoch (clamped to the
/// calendar's end).
fn after_millis(millis: u64) -> OffsetDateTime {
    let nanos = i128::from(millis.saturating_add(1)) * 1_000_000;
    OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .unwrap_or(time::macros::datetime!(9999-12-31 23:59:59 UTC))
}

fn unix_millis(at: OffsetDateTime) -> u64 {
    u64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(0)
}

pub(super) async fn history(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    Query(query): Query<HistoryQuery>,
) -> Response {
    let window = match Window::parse(&query, state.clock.now()) {
        Ok(window) => window,
        Err(message) => return error(StatusCode::BAD_REQUEST, &message),
    };
    let mut pager = Pager {
        store: state.store.clone(),
        name: name.clone(),
        from: window.from,
        remaining: window.limit,
        last_sent: None,
        more: false,
        finished: false,
    };
    // The first page is read before the status line, so that an unknown
    // check is a 404 and a store that fails at once a 500.
    let first = match pager.next_page().await {
        Ok(page) => page,
        Err(message) => return error(StatusCode::INTERNAL_SERVER_ERROR, &message),
    };
    if first.is_empty() && !state.slots.snapshot().contains_key(&name) {
        return error(StatusCode::NOT_FOUND, &format!("unknown check {name:?}"));
    }
    let head = match head(&name, window.since) {
        Ok(head) => head,
        Err(message) => return error(StatusCode::INTERNAL_SERVER_ERROR, &message),
    };
    let stream =
        futures_util::stream::unfold(Body::Head { head, first, pager }, |body| async move {
            body.advance().await
        });
    (
        [(header::CONTENT_TYPE, "application/json")],
        axum::body::Body::from_stream(stream),
    )
        .into_response()
}

/// `{"name":...,"since":...,"outcomes":[`: a [`HistoryView`] up to its
/// first result.
fn head(name: &str, since: OffsetDateTime) -> Result<Vec<u8>, String> {
    let since = since
        .format(&time::format_description::well_known::Rfc3339)
        .map_err(|e| e.to_string())?;
    let mut head = b"{\"name\":".to_vec();
    serde_json::to_writer(&mut head, name).map_err(|e| e.to_string())?;
    head.extend_from_slice(b",\"since\":");
    serde_json::to_writer(&mut head, &since).map_err(|e| e.to_string())?;
    head.extend_from_slice(b",\"outcomes\":[");
    Ok(head)
}

/// Reads the history a page at a time.
struct Pager {
    store: Arc<dyn Store>,
    name: String,
    from: OffsetDateTime,
    /// With `limit`: results still to send.
    remaining: Option<usize>,
    last_sent: Option<OffsetDateTime>,
    /// With `limit`: results remain after the last page.
    more: bool,
    finished: bool,
}

impl Pager {
    /// The next results to send; empty once finished.
    async fn next_page(&mut self) -> Result<Vec<Outcome>, String> {
        if self.finished {
            return Ok(Vec::new());
        }
        // One more than the limit leaves, to learn whether more remain.
        let want = match self.remaining {
            Some(remaining) => CHUNK.min(remaining + 1),
            None => CHUNK,
        };
        let (store, name, from) = (self.store.clone(), self.name.clone(), self.from);
        let mut page = tokio::task::spawn_blocking(move || store.history_page(&name, from, want))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        let exhausted = page.len() < want;
        if let Some(remaining) = self.remaining.as_mut() {
            if page.len() > *remaining {
                page.truncate(*remaining);
                self.more = true;
            }
            *remaining -= page.len();
        }
        self.finished = exhausted || self.more || self.remaining == Some(0);
        if let Some(last) = page.last() {
            self.last_sent = Some(last.started_at);
            self.from = last.started_at + time::Duration::milliseconds(1);
        }
        Ok(page)
    }

    /// `]`, `next_after` when more remain, and `}`.
    fn tail(&self) -> Vec<u8> {
        let mut tail = b"]".to_vec();
        if let (true, Some(last)) = (self.more, self.last_sent) {
            tail.extend_from_slice(format!(",\"next_after\":{}", unix_millis(last)).as_bytes());
        }
        tail.push(b'}');
        tail
    }
}

/// Where the streamed answer is.
enum Body {
    Head {
        head: Vec<u8>,
        first: Vec<Outcome>,
        pager: Pager,
    },
    Pages(Pager),
    Done,
}

impl Body {
    /// The next chunk of the answer and what follows it; a store that
    /// fails mid-answer ends the body with an error, which closes the
    /// connection before the JSON is complete: the client cannot take a
    /// cut history for a whole one.
    async fn advance(self) -> Option<(Result<Bytes, std::io::Error>, Body)> {
        match self {
            Body::Head {
                mut head,
                first,
                pager,
            } => {
                let written = write_outcomes(&mut head, &first, false);
                Some(finish(written.map(|()| head), pager))
            }
            Body::Pages(mut pager) => {
                if pager.finished {
                    return Some((Ok(Bytes::from(pager.tail())), Body::Done));
                }
                let page = match pager.next_page().await {
                    Ok(page) => page,
                    Err(message) => {
                        return Some((Err(mid_answer(&pager.name, message)), Body::Done))
                    }
                };
                let mut chunk = Vec::new();
                let written = write_outcomes(&mut chunk, &page, true);
                Some(finish(written.map(|()| chunk), pager))
            }
            Body::Done => None,
        }
    }
}

fn finish(chunk: Result<Vec<u8>, String>, pager: Pager) -> (Result<Bytes, std::io::Error>, Body) {
    match chunk {
        Ok(chunk) => (Ok(Bytes::from(chunk)), Body::Pages(pager)),
        Err(message) => (Err(mid_answer(&pager.name, message)), Body::Done),
    }
}

fn mid_answer(name: &str, message: String) -> std::io::Error {
    tracing::warn!(check = name, error = %message, "history answer cut short");
    std::io::Error::other(message)
}

/// `outcomes` as JSON array elements, a comma before each but the very
/// first of the answer.
fn write_outcomes(
    out: &mut Vec<u8>,
    outcomes: &[Outcome],
    after_others: bool,
) -> Result<(), String> {
    for (i, outcome) in outcomes.iter().enumerate() {
        if i > 0 || after_others {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, outcome).map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    const NOW: OffsetDateTime = datetime!(2026-11-29 07:00:00 UTC);

    fn query(since: Option<&str>, limit: Option<&str>, after: Option<&str>) -> HistoryQuery {
        HistoryQuery {
            since: since.map(str::to_string),
            limit: limit.map(str::to_string),
            after: after.map(str::to_string),
        }
    }

    #[test]
    fn a_window_past_a_month_needs_a_limit() {
        let err = Window::parse(&query(Some("10y"), None, None), NOW).unwrap_err();
        assert!(err.contains("more than 31d;"), "{err}");
        assert!(err.contains("`limit`"), "{err}");
        let month = Window::parse(&query(Some("31d"), None, None), NOW).unwrap();
        assert_eq!(month.since, NOW - time::Duration::days(31));
        assert_eq!(month.limit, None);
        let paged = Window::parse(&query(Some("10y"), Some("500"), None), NOW).unwrap();
        assert_eq!(paged.limit, Some(500));
        assert_eq!(paged.from, paged.since);
    }

    #[test]
    fn limit_and_after_are_checked() {
        for bad in ["0", "10001", "-1", "many"] {
            let err = Window::parse(&query(None, Some(bad), None), NOW).unwrap_err();
            assert!(err.starts_with("limit:"), "{bad}: {err}");
        }
        let err = Window::parse(&query(None, Some("5"), Some("yesterday")), NOW).unwrap_err();
        assert!(err.starts_with("after:"), "{err}");
        let at = NOW - time::Duration::hours(1);
        let millis = unix_millis(at).to_string();
        let next = Window::parse(&query(None, Some("5"), Some(&millis)), NOW).unwrap();
        assert_eq!(next.from, at + time::Duration::milliseconds(1));
        // An `after` before the window does not widen it.
        let old = Window::parse(&query(None, Some("5"), Some("0")), NOW).unwrap();
        assert_eq!(old.from, old.since);
        assert_eq!(after_millis(u64::MAX).year(), 9999);
    }
}
