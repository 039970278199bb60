//! The public status page: `/status`, `/status/feed.atom` and
//! `/status/badge/{name}.svg`, served without a token when
//! `[status_page] public = true` (and answering 404 otherwise, so a reload
//! turns them on and off).
//!
//! - `view`: the public data and the one function that redacts the
//!   operator pages' data into it.
//! - `cache`: one snapshot of everything public, built at most once per
//!   10 s whatever the request rate, with its ETags.
//! - `render`, `feed`, `badge`: the page (HTML, no script), the Atom
//!   feed, the SVG badges, all drawn from the snapshot.
//!
//! The data comes from the operator pages' builders (`pages::build` for the
//! day bars, uptime and certificate, through `pages::rows`, which keeps
//! each check's figures between builds and reads only what a new result
//! changed; `pages::streaks` for the incidents)
//! and the incident updates the on-call person wrote. The listener's bounds
//! (request deadline, connection cap, host check) are in front of these
//! routes as of every other.

mod badge;
mod cache;
mod feed;
mod render;
mod view;

pub use cache::StatusCache;

use std::cmp::Reverse;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use time::{Duration, OffsetDateTime};

use super::pages::{self, incidents};
use super::ApiState;
use crate::alert::{maintenance_end, Policy};
use crate::config::Config;
use crate::incident_update::markdown_html;
use cache::Snapshot;
use view::{Notice, PublicIncident, PublicStatus};

/// Most incidents the page and the feed list (the newest, open first).
const INCIDENTS: usize = 50;
/// How far ahead a public maintenance window is announced.
const MAINTENANCE_NOTICE: Duration = Duration::days(7);
/// A badge is an image: it may not load anything, even from vigie.
const BADGE_CSP: &str = "default-src 'none'";

pub(super) fn router() -> Router<ApiState> {
    Router::new()
        .route("/status", get(status_page))
        .route("/status/feed.atom", get(status_feed))
        .route("/status/badge/{file}", get(status_badge))
}

async fn status_page(State(state): State<ApiState>, headers: HeaderMap) -> Response {
    let snapshot = match snapshot(&state).await {
        Ok(snapshot) => snapshot,
        Err(refused) => return refused,
    };
    let fresh = !matches(&headers, &snapshot.page_etag);
    let mut response = body(fresh, "text/html; charset=utf-8", &snapshot.page);
    pages::page_headers(response.headers_mut());
    validated(response, &snapshot.page_etag)
}

async fn status_feed(State(state): State<ApiState>, headers: HeaderMap) -> Response {
    let snapshot = match snapshot(&state).await {
        Ok(snapshot) => snapshot,
        Err(refused) => return refused,
    };
    let fresh = !matches(&headers, &snapshot.feed_etag);
    let response = body(fresh, "application/atom+xml; charset=utf-8", &snapshot.feed);
    validated(response, &snapshot.feed_etag)
}

async fn status_badge(
    State(state): State<ApiState>,
    Path(file): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let show = match query.get("show").map(String::as_str) {
        None | Some("status") => badge::Show::Status,
        Some("uptime") => badge::Show::Uptime,
        Some(_) => {
            return (StatusCode::BAD_REQUEST, "show must be status or uptime").into_response()
        }
    };
    let snapshot = match snapshot(&state).await {
        Ok(snapshot) => snapshot,
        Err(refused) => return refused,
    };
    // The same answer for a check that does not exist and one that is not
    // public, so the badge route tells nothing about the hidden ones.
    let Some(check) = file
        .strip_suffix(".svg")
        .and_then(|name| snapshot.status.check(name))
    else {
        return (StatusCode::NOT_FOUND, "no public check by that name").into_response();
    };
    let svg = badge::badge(check, show);
    let etag = cache::etag(&svg);
    let fresh = !matches(&headers, &etag);
    let mut response = body(fresh, "image/svg+xml", &Bytes::from(svg));
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(BADGE_CSP),
    );
    validated(response, &etag)
}

/// The snapshot in force, or the answer when the page is off or cannot
/// be built.
async fn snapshot(state: &ApiState) -> Result<Arc<Snapshot>, Response> {
    if !state.config.borrow().status_page.public {
        return Err((StatusCode::NOT_FOUND, "not found").into_response());
    }
    state.status.current(|| build_snapshot(state)).await
}

async fn build_snapshot(state: &ApiState) -> Result<Snapshot, Response> {
    let now = state.clock.now();
    let config = state.config.borrow().clone();
    let store = state.store.clone();
    let latest = state.latest.clone();
    let updates = state.updates.clone();
    let cache = state.status.clone();
    let built = tokio::task::spawn_blocking(move || {
        let status = gather(&config, &*store, &latest, updates.as_ref(), &cache, now)?;
        let page = render::page(&status).into_string();
        let base = config.api.public_url.as_ref().map(|u| u.as_str());
        let feed = feed::feed(&status, base);
        Ok::<_, crate::store::StoreError>((status, page, feed))
    })
    .await;
    match built {
        Ok(Ok((status, page, feed))) => Ok(Snapshot::new(status, page, feed)),
        Ok(Err(err)) => Err(pages::store_failed(err)),
        Err(_) => Err((
            StatusCode::INTERNAL_SERVER_ERROR,
            "the status page panicked; see vigie's log",
        )
            .into_response()),
    }
}

/// Everything public at `now`: reads the store (one pass per public
/// check) and the config.
fn gather(
    config: &Config,
    store: &dyn crate::store::Store,
    latest: &crate::store::Latest,
    updates: Option<&crate::store::IncidentUpdates>,
    cache: &StatusCache,
    now: OffsetDateTime,
) -> Result<PublicStatus, crate::store::StoreError> {
    let page = &config.status_page;
    let public: Vec<_> = config
        .checks
        .iter()
        .filter(|c| page.shows(&c.name))
        .collect();
    // What is kept between builds follows the checks listed now: a check
    // removed from the config or from the page is forgotten.
    let names: HashSet<&str> = public.iter().map(|c| c.name.as_str()).collect();
    let listed = |name: &str| names.contains(name);
    cache.streaks.retain(listed);
    cache.rows.retain(listed);
    let windows: Vec<_> = config.maintenance.iter().filter(|w| w.public).collect();
    let policies = Policy::of_every_check(config);
    let records = incidents::Records {
        store,
        told: None,
        updates,
        policies: &policies,
    };
    let mut checks = Vec::with_capacity(public.len());
    let mut incidents: Vec<PublicIncident> = Vec::new();
    for check in &public {
        let newest = latest.get(&check.name);
        let row = cache.rows.row(store, check, newest.as_deref(), now)?;
        let maintenance = windows
            .iter()
            .any(|w| w.covers(&check.name) && maintenance_end(w, now).is_some());
        let group = check.labels.get(&page.groups).cloned();
        checks.push((view::public(&row, page, maintenance), group));
        let newest_at = newest.map(|o| o.started_at);
        let streaks = cache.streaks.streaks(store, &check.name, newest_at, now)?;
        // The alerter's incidents only: a blip under the failure threshold
        // paged nobody, so it is no news to the public either.
        let (found, _blips) = records.sort(streaks.list.clone())?;
        incidents.extend(found.iter().map(view::public_incident));
    }
    incidents.sort_by_key(|i| Reverse((i.end.is_none(), i.start)));
    incidents.truncate(INCIDENTS);
    Ok(PublicStatus {
        title: page.title.clone(),
        now,
        notices: notices(config, &public, now),
        groups: view::group(checks),
        incidents,
    })
}

/// The announcements in force, then the next opening of each public
/// maintenance window within 7 days that covers a public check (named by
/// the public checks it covers, never by its patterns).
fn notices(
    config: &Config,
    public: &[&Arc<crate::check::Check>],
    now: OffsetDateTime,
) -> Vec<Notice> {
    let mut notices: Vec<Notice> = config
        .announcements
        .iter()
        .filter(|a| a.is_shown(now))
        .map(|a| Notice {
            title: a.title.clone(),
            html: Some(markdown_html(&a.text)),
            from: a.from,
            until: a.until,
        })
        .collect();
    for window in config.maintenance.iter().filter(|w| w.public) {
        let covered: Vec<&str> = public
            .iter()
            .filter(|c| window.covers(&c.name))
            .map(|c| c.name.as_str())
            .collect();
        if covered.is_empty() {
            continue;
        }
        let next = pages::window_rows(std::iter::once(window), now, now + MAINTENANCE_NOTICE)
            .into_iter()
            .next();
        if let Some(row) = next {
            notices.push(Notice {
                title: format!("Scheduled maintenance: {}", covered.join(", ")),
                html: None,
                from: row.start,
                until: row.end,
            });
        }
    }
    notices
}

/// Whether `If-None-Match` names `etag` (or `*`).
fn matches(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|tag| tag.trim().trim_start_matches("W/"))
        .any(|tag| tag == etag || tag == "*")
}

/// `response` with its ETag, to be revalidated on every use: `no-cache`,
/// not the operator pages' `no-store`, so a browser may keep it and ask
/// with `If-None-Match`.
fn validated(mut response: Response, etag: &str) -> Response {
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(etag) {
        headers.insert(header::ETAG, value);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// 200 with `bytes` (shared, not copied), or 304 without a body when the
/// client holds them already.
fn body(fresh: bool, content_type: &'static str, bytes: &Bytes) -> Response {
    let mut response = match fresh {
        true => (StatusCode::OK, bytes.clone()).into_response(),
        false => StatusCode::NOT_MODIFIED.into_response(),
    };
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;
    use crate::alert::IncidentId;
    use crate::incident_update::{IncidentUpdate, UpdateState};
    use crate::outcome::{Assertion, Failure, Status};
    use crate::store::{IncidentUpdates, Latest, MemoryStore, Store};
    use crate::testing::up;

    const NOW: OffsetDateTime = datetime!(2026-12-07 20:00 UTC);
    const SECRET_URL: &str = "https://10.9.8.7:8443/internal-admin-path";
    const FAILURE: &str = "HTTP 503 from the backend pool blue-7";

    fn config(dir: &std::path::Path) -> Config {
        std::fs::create_dir_all(dir.join("checks")).unwrap();
        let checks = format!(
            "[[check]]\nname = \"api\"\nkind = \"http\"\nurl = \"{SECRET_URL}\"\n\
             labels = {{ env = \"prod\", team = \"hidden-team\" }}\n\
             [[check]]\nname = \"db\"\nkind = \"http\"\nurl = \"https://db.example/\"\n\
             labels = {{ env = \"prod\" }}\n\
             [[check]]\nname = \"blog\"\nkind = \"http\"\nurl = \"https://blog.example/\"\n\
             [[check]]\nname = \"backoffice\"\nkind = \"http\"\nurl = \"https://bo.example/\"\n"
        );
        std::fs::write(dir.join("checks/all.toml"), checks).unwrap();
        let text = "[alerting]\nto = [\"oncall@example.com\"]\n\
             [status_page]\npublic = true\ntitle = \"Example status\"\n\
             checks = [\"api\", \"db\", \"blog\"]\npublic_labels = [\"env\"]\n\
             [[announcement]]\ntitle = \"Datacentre move\"\n\
             text = \"We move on **Sunday**. <script>alert(1)</script>\"\n\
             from = \"2026-12-01T00:00:00Z\"\nuntil = \"2027-01-01T00:00:00Z\"\n\
             [[announcement]]\ntitle = \"Long gone\"\ntext = \"old\"\n\
             from = \"2026-01-01T00:00:00Z\"\nuntil = \"2026-01-02T00:00:00Z\"\n\
             [[maintenance]]\nchecks = [\"db\"]\nschedule = \"0 0 22 * * *\"\nduration = \"1h\"\npublic = true\n\
             [[maintenance]]\nchecks = [\"backoffice\"]\nschedule = \"0 0 21 * * *\"\nduration = \"1h\"\n";
        crate::config::load_str(&dir.join("config.toml"), text).unwrap()
    }

    fn down(name: &str, at: OffsetDateTime) -> crate::outcome::Outcome {
        let mut outcome = up(name, at);
        outcome.target = SECRET_URL.to_string();
        outcome.status = Status::Down;
        outcome.failures = vec![Failure {
            assertion: Assertion::HttpStatus,
            expected: "200".into(),
            observed: "503".into(),
            message: FAILURE.into(),
        }];
        outcome
    }

    /// A store where `api` has been down since 19:50 with an update
    /// written, `db` and `blog` up, `backoffice` (not public) down.
    fn world() -> (MemoryStore, Latest, IncidentUpdates, OffsetDateTime) {
        let store = MemoryStore::new();
        let latest = Latest::default();
        let start = NOW - Duration::minutes(10);
        let record = |o: crate::outcome::Outcome| {
            store.append(&o).unwrap();
            latest.record(Arc::new(o));
        };
        record(up("api", start - Duration::minutes(1)));
        record(down("api", start));
        record(down("api", NOW - Duration::minutes(1)));
        record(up("db", NOW - Duration::minutes(1)));
        record(up("blog", NOW - Duration::minutes(1)));
        record(down("backoffice", NOW - Duration::minutes(1)));
        let updates = IncidentUpdates::in_memory();
        updates
            .add(&IncidentUpdate {
                check: "api".into(),
                incident: IncidentId::new("api", start),
                since: start,
                at: NOW - Duration::minutes(5),
                state: UpdateState::Identified,
                text: "A bad deploy; **rolling back**.".into(),
            })
            .unwrap();
        (store, latest, updates, start)
    }

    fn status() -> PublicStatus {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path());
        let (store, latest, updates, _) = world();
        let cache = StatusCache::default();
        gather(&config, &store, &latest, Some(&updates), &cache, NOW).unwrap()
    }

    #[test]
    fn a_blip_under_the_failure_threshold_is_no_public_incident() {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path());
        let (store, latest, updates, _) = world();
        // One failed probe of `blog` between two good ones: under the
        // default threshold of 2, it paged nobody.
        for (minute, good) in [(9, true), (8, false), (7, true)] {
            let at = NOW - Duration::minutes(minute);
            let outcome = if good {
                up("blog", at)
            } else {
                down("blog", at)
            };
            store.append(&outcome).unwrap();
            latest.record(Arc::new(outcome));
        }
        let cache = StatusCache::default();
        let status = gather(&config, &store, &latest, Some(&updates), &cache, NOW).unwrap();
        let checks: Vec<&str> = status.incidents.iter().map(|i| i.check.as_str()).collect();
        assert_eq!(checks, ["api"], "the blip of blog is not listed");
    }

    #[test]
    fn an_incident_s_updates_read_newest_first_on_the_page_and_in_the_feed() {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path());
        let (store, latest, updates, start) = world();
        updates
            .add(&IncidentUpdate {
                check: "api".into(),
                incident: IncidentId::new("api", start),
                since: start,
                at: NOW - Duration::minutes(2),
                state: UpdateState::Monitoring,
                text: "Rolled back; watching.".into(),
            })
            .unwrap();
        let cache = StatusCache::default();
        let status = gather(&config, &store, &latest, Some(&updates), &cache, NOW).unwrap();
        let html = render::page(&status).into_string();
        let (newer, older) = (
            html.find("Rolled back").unwrap(),
            html.find("rolling back").unwrap(),
        );
        assert!(newer < older, "newest first on the page: {html}");
        let xml = feed::feed(&status, None);
        let (newer, older) = (
            xml.find("Rolled back").unwrap(),
            xml.find("rolling back").unwrap(),
        );
        assert!(newer < older, "newest first in the feed: {xml}");
    }

    #[test]
    fn a_young_history_reads_since_its_start_not_as_days_of_record() {
        let html = render::page(&status()).into_string();
        // Every check's first result is minutes old: one figure, headed
        // by when the history began.
        assert!(html.contains("<dt>since 19:49 UTC</dt>"), "{html}");
        assert!(
            !html.contains("<dt>30 d</dt>") && !html.contains("<dt>90 d</dt>"),
            "{html}"
        );
    }

    #[test]
    fn the_page_shows_words_groups_notices_and_updates_and_nothing_private() {
        let status = status();
        let html = render::page(&status).into_string();
        let titles: Vec<&str> = status.groups.iter().map(|g| g.title.as_str()).collect();
        assert_eq!(titles, ["prod", "Other"]);
        assert_eq!(status.check("api").unwrap().word.text(), "Down");
        assert_eq!(status.check("db").unwrap().word.text(), "Operational");
        assert!(status.check("backoffice").is_none());
        for shown in [
            "Some systems down",
            "Datacentre move",
            "<strong>Sunday</strong>",
            "&lt;script&gt;",
            "Scheduled maintenance: db",
            "rolling back",
            "identified",
            "env=prod",
        ] {
            assert!(html.contains(shown), "{shown} missing from {html}");
        }
        for hidden in [
            "10.9.8.7",
            "internal-admin-path",
            FAILURE,
            "hidden-team",
            "team",
            "backoffice",
            "Long gone",
            "<script>",
            "example.com",
            "/api/v1/",
        ] {
            assert!(!html.contains(hidden), "{hidden} leaked into {html}");
        }
    }

    #[test]
    fn the_feed_is_atom_with_each_incident_and_its_updates() {
        let status = status();
        let xml = feed::feed(&status, Some("https://status.example.com/"));
        let parsed = atom_syndication::Feed::read_from(xml.as_bytes()).expect("valid Atom");
        assert_eq!(parsed.id(), "https://status.example.com/status/feed.atom");
        let entries = parsed.entries();
        assert_eq!(entries.len(), 1, "{xml}");
        let entry = &entries[0];
        assert!(entry
            .title()
            .as_str()
            .starts_with("api: incident since 2026-12-07 19:50 UTC (ongoing)"));
        let content = entry.content().and_then(|c| c.value()).unwrap();
        assert!(
            content.contains("<strong>rolling back</strong>"),
            "{content}"
        );
        assert!(!xml.contains(FAILURE) && !xml.contains("10.9.8.7"), "{xml}");
    }

    #[test]
    fn a_badge_is_svg_naming_the_check_and_its_word_or_uptime() {
        let status = status();
        let api = status.check("api").unwrap();
        let text = |svg: &str| {
            let mut reader = quick_xml::Reader::from_str(svg);
            let mut texts = Vec::new();
            loop {
                match reader.read_event().expect("well-formed SVG") {
                    quick_xml::events::Event::Text(t) => {
                        texts.push(t.decode().unwrap().into_owned())
                    }
                    quick_xml::events::Event::Eof => break texts,
                    _ => {}
                }
            }
        };
        let svg = badge::badge(api, badge::Show::Status);
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert_eq!(text(&svg), ["api: Down", "api", "Down"]);
        let svg = badge::badge(status.check("db").unwrap(), badge::Show::Uptime);
        assert_eq!(text(&svg), ["db: 100.00% 30d", "db", "100.00% 30d"]);
    }

    #[test]
    fn if_none_match_names_the_etag_or_any() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::IF_NONE_MATCH, HeaderValue::from_str(value).unwrap());
            headers
        };
        assert!(matches(&with("\"abc\""), "\"abc\""));
        assert!(matches(&with("\"x\", W/\"abc\""), "\"abc\""));
        assert!(matches(&with("*"), "\"abc\""));
        assert!(!matches(&with("\"abd\""), "\"abc\""));
        assert!(!matches(&HeaderMap::new(), "\"abc\""));
    }
}
