//! The status pages, on the API's listener with the API's token rules:
//! `/` (every check: status, 90-day bar, uptime, certificate), `/checks/{name}`
//! (response times, the latest failures, incidents and blips, the
//! certificate timeline), `/incidents`, one incident's page
//! `/incidents/{key}`, and `/login`; the JSON behind them is
//! `/api/v1/uptime/{name}` and `/api/v1/certificates/{name}`.
//!
//! With a token configured, a browser logs in with the form at `/login`
//! (never with the token in the address, which browser history would
//! keep): a session cookie (`session.rs`), accepted for reading pages
//! (GET and HEAD) and for one change only, the incident update form's
//! POST, which has its own guard against forgery (`update_form.rs`). Logins are
//! throttled per client (`throttle.rs`); `login.rs` holds both. Every page
//! carries a strict Content-Security-Policy: nothing loads from another
//! origin, no inline script or style.

pub(super) mod build;
mod chart;
pub(super) mod incidents;
mod login;
mod render;
pub(super) mod rows;
pub(super) mod streaks;
mod update_form;
pub(super) mod view;

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use maud::Markup;
use serde::Serialize;
use time::{Duration, OffsetDateTime};

use super::reply::error;
use super::ApiState;
use crate::alert::{maintenance_end, Policy};
use crate::store::Granularity;
use login::{login, login_form, require_session};
use std::sync::Arc;
use streaks::StreakCache;

/// The label checks are grouped by on the overview.
const GROUP_BY: &str = "env";
const CSP: &str = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

pub(super) fn router(state: ApiState) -> Router<ApiState> {
    Router::new()
        .route("/", get(overview))
        .route("/checks/{name}", get(check))
        .route("/incidents", get(incidents))
        .route("/incidents/{key}", get(update_form::incident))
        .layer(middleware::from_fn_with_state(state, require_session))
        // The one change a session may make, with its own guard against
        // forgery (`update_form.rs`), outside the pages' read-only rule.
        .route("/incidents/{key}/updates", post(update_form::post_update))
        // One cache of failure streaks for the router's life.
        .layer(Extension(Arc::new(StreakCache::default())))
        .route("/login", get(login_form).post(login))
        .route("/assets/vigie.css", get(css))
        .route("/assets/vigie.js", get(js))
        .route("/assets/favicon.svg", get(favicon))
}

/// An HTML page with the headers every page carries.
pub(super) fn page(code: StatusCode, markup: Markup) -> Response {
    let mut response = (code, markup).into_response();
    page_headers(response.headers_mut());
    response
}

/// The headers of every page: the CSP, no sniffing, no referrer, no
/// caching.
pub(super) fn page_headers(headers: &mut axum::http::HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // `same-origin`, not `no-referrer`: no address of vigie's ever reaches
    // another site either way, but under `no-referrer` a browser sends
    // `Origin: null` with the update form's POST, which the form's guard
    // (`update_form.rs`) must be able to tell from vigie's own origin.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

async fn css() -> Response {
    asset("text/css; charset=utf-8", include_str!("assets/vigie.css"))
}

async fn js() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("assets/vigie.js"),
    )
}

async fn favicon() -> Response {
    asset("image/svg+xml", include_str!("assets/favicon.svg"))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("max-age=300"),
    );
    response
}

fn footer(state: &ApiState, now: OffsetDateTime) -> view::Footer {
    let verdict = state.health.verdict(now);
    let mail = state.mail.as_ref().map(|m| m.snapshot());
    view::Footer {
        healthy: verdict.is_healthy() && verdict.degraded.is_empty(),
        health: health_words(&verdict),
        replication_lag: state.replication.as_ref().map(|r| {
            let lag = r.snapshot(now).lag_seconds;
            crate::when::span(time::Duration::seconds(lag as i64))
        }),
        outbox_backlog: mail.as_ref().map(|m| m.backlog),
        dead_letters: mail.as_ref().map(|m| m.dead_letters),
        last_report: state
            .alerts
            .as_ref()
            .and_then(|a| a.status.last_report())
            .map(crate::when::minute),
        version: env!("CARGO_PKG_VERSION"),
    }
}

/// `ok`, `ok, degraded: ...`, or the status and its reason.
fn health_words(verdict: &crate::health::Verdict) -> String {
    if !verdict.is_healthy() {
        let status = serde_json::to_value(verdict.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        return match &verdict.reason {
            Some(reason) => format!("{status}: {reason}"),
            None => status,
        };
    }
    match verdict.degraded.is_empty() {
        true => "ok".to_string(),
        false => format!("ok, degraded: {}", verdict.degraded.join("; ")),
    }
}

pub(super) fn store_failed(err: crate::store::StoreError) -> Response {
    tracing::error!(error = %err, "a page could not read the store");
    (
        StatusCode::SERVICE_UNAVAILABLE,
        "the store cannot be read; see vigie's log",
    )
        .into_response()
}

/// The silences in force, asked of the alerter (none without one).
async fn silences(state: &ApiState, now: OffsetDateTime) -> Vec<crate::alert::Silence> {
    let all = match &state.alerts {
        Some(_) => super::alerts::ask(state, crate::alert::AlertRequest::Silences)
            .await
            .unwrap_or_default(),
        None => Vec::new(),
    };
    all.into_iter().filter(|s| s.is_active(now)).collect()
}

/// What the rows learn outside the store: the silences in force, the
/// config's maintenance windows and the scheduler's slots.
struct Outside<'a> {
    silences: &'a [crate::alert::Silence],
    config: &'a crate::config::Config,
    slots: &'a std::collections::BTreeMap<String, Arc<crate::scheduler::Slot>>,
}

/// What a row learns outside the store: the vantages' note, the hold on
/// its pages, and, without a result yet, the scheduler's first due time.
fn annotate(row: &mut view::CheckRow, state: &ApiState, outside: &Outside, now: OffsetDateTime) {
    row.vantage = state
        .alerts
        .as_ref()
        .and_then(|a| a.status.fleet_note(&row.name));
    row.hold = crate::alert::hold(
        &row.name,
        now,
        outside.silences,
        &outside.config.maintenance,
    );
    if row.status.is_none() {
        row.first_probe = outside
            .slots
            .get(&row.name)
            .and_then(|slot| slot.next_due());
    }
}

async fn overview(State(state): State<ApiState>) -> Response {
    let now = state.clock.now();
    let config = state.config.borrow().clone();
    let silences = silences(&state, now).await;
    let store = state.store.clone();
    let latest = state.latest.clone();
    let checks = config.clone();
    let rows = tokio::task::spawn_blocking(move || {
        checks
            .checks
            .iter()
            .map(|check| {
                let newest = latest.get(&check.name);
                build::check_row(store.as_ref(), check, newest.as_deref(), now)
            })
            .collect::<Result<Vec<_>, _>>()
    })
    .await;
    match rows {
        Ok(Ok(mut rows)) => {
            let slots = state.slots.snapshot();
            let outside = Outside {
                silences: &silences,
                config: &config,
                slots: &slots,
            };
            for row in &mut rows {
                annotate(row, &state, &outside, now);
            }
            page(
                StatusCode::OK,
                render::overview(&build::group(rows, GROUP_BY), now, &footer(&state, now)),
            )
        }
        Ok(Err(err)) => store_failed(err),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "the page panicked; see vigie's log",
        )
            .into_response(),
    }
}

async fn check(
    State(state): State<ApiState>,
    Extension(cache): Extension<Arc<StreakCache>>,
    Path(name): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let now = state.clock.now();
    let config = state.config.borrow().clone();
    let Some(check) = config.checks.iter().find(|c| c.name == name).cloned() else {
        return page(
            StatusCode::NOT_FOUND,
            render::not_found(&name, &footer(&state, now)),
        );
    };
    let silences = silences(&state, now).await;
    let (range, span, granularity) = build::range(query.get("range").map_or("24h", String::as_str));
    let store = state.store.clone();
    let newest = state.latest.get(&name);
    let told = state.told.clone();
    let updates = state.updates.clone();
    let policies = Policy::of_every_check(&config);
    let built = tokio::task::spawn_blocking(move || {
        let latest = newest.as_deref();
        let row = build::check_row(store.as_ref(), &check, latest, now)?;
        let current = latest
            .and_then(|o| o.tls.as_ref())
            .and_then(|tls| tls.chain.first())
            .map(|leaf| leaf.sha256.clone());
        let rollups = store.rollups(&name, granularity, now - span)?;
        let newest = latest.map(|o| o.started_at);
        Ok::<_, crate::store::StoreError>((
            row,
            latest.map(|o| o.target.clone()),
            build::response_series(&rollups, granularity, now),
            build::failures(latest),
            {
                let streaks = cache.streaks(store.as_ref(), &name, newest, now)?;
                let records = incidents::Records {
                    store: store.as_ref(),
                    told: told.as_ref(),
                    updates: updates.as_ref(),
                    policies: &policies,
                };
                (records.sort(streaks.list.clone())?, streaks.capped)
            },
            build::leaves(store.as_ref(), &name, current.as_deref())?,
        ))
    })
    .await;
    match built {
        Ok(Ok((mut row, target, series, failures, streaks, leaves))) => {
            let slots = state.slots.snapshot();
            let outside = Outside {
                silences: &silences,
                config: &config,
                slots: &slots,
            };
            annotate(&mut row, &state, &outside, now);
            let check_page = render::CheckPage {
                check: &row,
                target: target.as_deref(),
                range,
                from: now - span,
                now,
                series,
                failures,
                incidents: &streaks.0 .0,
                blips: &streaks.0 .1,
                capped: streaks.1,
                leaves,
            };
            page(
                StatusCode::OK,
                render::check_page(&check_page, &footer(&state, now)),
            )
        }
        Ok(Err(err)) => store_failed(err),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "the page panicked; see vigie's log",
        )
            .into_response(),
    }
}

async fn incidents(
    State(state): State<ApiState>,
    Extension(cache): Extension<Arc<StreakCache>>,
) -> Response {
    let now = state.clock.now();
    let config = state.config.borrow().clone();
    let silences = silences(&state, now).await;
    let windows = windows(&config, now);
    let store = state.store.clone();
    let checks: Vec<(String, Option<OffsetDateTime>)> = config
        .checks
        .iter()
        .map(|c| {
            let newest = state.latest.get(&c.name).map(|o| o.started_at);
            (c.name.clone(), newest)
        })
        .collect();
    cache.retain(|name| checks.iter().any(|(n, _)| n == name));
    let told = state.told.clone();
    let updates = state.updates.clone();
    let policies = Policy::of_every_check(&config);
    let found = tokio::task::spawn_blocking(move || {
        let mut all = Vec::new();
        let mut capped = false;
        for (name, newest) in checks {
            let streaks = cache.streaks(store.as_ref(), &name, newest, now)?;
            capped |= streaks.capped;
            all.extend(streaks.list.iter().cloned());
        }
        all.sort_by_key(|i| std::cmp::Reverse((i.end.is_none(), i.start)));
        capped |= all.len() > streaks::SHOWN;
        all.truncate(streaks::SHOWN);
        let records = incidents::Records {
            store: store.as_ref(),
            told: told.as_ref(),
            updates: updates.as_ref(),
            policies: &policies,
        };
        let (incidents, blips) = records.sort(all)?;
        Ok::<_, crate::store::StoreError>((incidents, blips, capped))
    })
    .await;
    match found {
        Ok(Ok((incidents, blips, capped))) => page(
            StatusCode::OK,
            render::incidents_page(
                &incidents,
                &blips,
                capped,
                &silences,
                &windows,
                now,
                &footer(&state, now),
            ),
        ),
        Ok(Err(err)) => store_failed(err),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "the page panicked; see vigie's log",
        )
            .into_response(),
    }
}

/// Maintenance windows open now or opening within 7 days.
fn windows(config: &crate::config::Config, now: OffsetDateTime) -> Vec<render::WindowRow> {
    window_rows(config.maintenance.iter(), now, now + Duration::days(7))
}

/// The openings of `windows` that are open at `now` or open by `horizon`,
/// in time order.
pub(super) fn window_rows<'a>(
    windows: impl Iterator<Item = &'a crate::config::MaintenanceWindow>,
    now: OffsetDateTime,
    horizon: OffsetDateTime,
) -> Vec<render::WindowRow> {
    let mut rows = Vec::new();
    for window in windows {
        let checks = window.checks.join(", ");
        let duration = Duration::try_from(window.duration).unwrap_or(Duration::ZERO);
        if let Some(end) = maintenance_end(window, now) {
            rows.push(render::WindowRow {
                checks: checks.clone(),
                start: end - duration,
                end,
            });
        }
        let mut from = now;
        while let Some(start) = crate::schedule::next_after(&window.schedule, from) {
            if start > horizon || rows.len() > 100 {
                break;
            }
            rows.push(render::WindowRow {
                checks: checks.clone(),
                start,
                end: start + duration,
            });
            from = start;
        }
    }
    rows.sort_by_key(|w| w.start);
    rows
}

/// `GET /api/v1/uptime/{name}?days=90`: exactly one entry per day of the
/// window, oldest first; a day without results has zero counts and `null`
/// figures.
#[derive(Debug, Serialize)]
struct UptimeDay {
    date: String,
    up: u64,
    warn: u64,
    down: u64,
    uptime: Option<f64>,
    p50_ms: Option<f64>,
    p95_ms: Option<f64>,
}

pub(super) async fn uptime_json(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let days: i64 = match query.get("days").map(|d| d.parse::<i64>()) {
        None => 90,
        Some(Ok(d)) if (1..=400).contains(&d) => d,
        Some(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "days must be a whole number from 1 to 400",
            )
        }
    };
    let now = state.clock.now();
    if !state.config.borrow().checks.iter().any(|c| c.name == name) {
        return error(
            StatusCode::NOT_FOUND,
            &format!("no check named {name:?} in the config"),
        );
    }
    let from = now.replace_time(time::Time::MIDNIGHT) - Duration::days(days - 1);
    let store = state.store.clone();
    let read =
        tokio::task::spawn_blocking(move || store.rollups(&name, Granularity::Day, from)).await;
    match read {
        Ok(Ok(rollups)) => {
            let days = uptime_days(&rollups, from, days);
            Json(serde_json::json!({ "days": days })).into_response()
        }
        Ok(Err(err)) => store_failed(err),
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the request panicked; see vigie's log",
        ),
    }
}

/// `count` days from `from` (a midnight), each with its rollup's figures
/// or, without one, zero counts and `null` figures.
fn uptime_days(
    rollups: &[crate::store::Rollup],
    from: OffsetDateTime,
    count: i64,
) -> Vec<UptimeDay> {
    let by_day: HashMap<time::Date, &crate::store::Rollup> =
        rollups.iter().map(|r| (r.start.date(), r)).collect();
    (0..count)
        .map(|d| {
            let date = (from + Duration::days(d)).date();
            match by_day.get(&date) {
                Some(r) => UptimeDay {
                    date: date.to_string(),
                    up: r.up,
                    warn: r.warn,
                    down: r.down,
                    uptime: r.uptime(),
                    p50_ms: r.p50(),
                    p95_ms: r.p95(),
                },
                None => UptimeDay {
                    date: date.to_string(),
                    up: 0,
                    warn: 0,
                    down: 0,
                    uptime: None,
                    p50_ms: None,
                    p95_ms: None,
                },
            }
        })
        .collect()
}

/// `GET /api/v1/certificates/{name}`: every leaf the check served.
#[derive(Serialize)]
struct LeafJson {
    sha256: String,
    subject: String,
    issuer: String,
    staging: bool,
    #[serde(with = "time::serde::rfc3339")]
    not_before: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    not_after: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    first_seen: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    last_seen: OffsetDateTime,
}

pub(super) async fn certificates_json(
    State(state): State<ApiState>,
    Path(name): Path<String>,
) -> Response {
    let store = state.store.clone();
    let read =
        tokio::task::spawn_blocking(move || build::leaves(store.as_ref(), &name, None)).await;
    match read {
        Ok(Ok(leaves)) => {
            let leaves: Vec<LeafJson> = leaves
                .into_iter()
                .map(|l| LeafJson {
                    sha256: l.sha256,
                    subject: l.subject,
                    issuer: l.issuer,
                    staging: l.staging,
                    not_before: l.not_before,
                    not_after: l.not_after,
                    first_seen: l.first_seen,
                    last_seen: l.last_seen,
                })
                .collect();
            Json(serde_json::json!({ "certificates": leaves })).into_response()
        }
        Ok(Err(err)) => store_failed(err),
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the request panicked; see vigie's log",
        ),
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    #[test]
    fn the_uptime_json_has_one_entry_per_day_with_null_figures_where_no_data() {
        let from = datetime!(2026-12-01 00:00 UTC);
        let mut rollup = crate::store::Rollup::empty(
            Granularity::Day,
            (from + Duration::days(2)).unix_timestamp() as u64 * 1000,
        );
        rollup.up = 3;
        rollup.down = 1;
        let days = uptime_days(&[rollup], from, 5);
        let dates: Vec<&str> = days.iter().map(|d| d.date.as_str()).collect();
        assert_eq!(
            dates,
            [
                "2026-12-01",
                "2026-12-02",
                "2026-12-03",
                "2026-12-04",
                "2026-12-05"
            ]
        );
        assert_eq!(days[2].uptime, Some(0.75));
        let json = serde_json::to_value(&days[0]).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"date": "2026-12-01", "up": 0, "warn": 0, "down": 0,
                "uptime": null, "p50_ms": null, "p95_ms": null})
        );
    }
}
