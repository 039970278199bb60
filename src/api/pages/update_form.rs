//! `/incidents/{key}`: one incident of the alerter, its updates, and the
//! form that adds one; `POST /incidents/{key}/updates` takes that form.
//!
//! That POST is the one change a browser session may make (every other
//! page is read-only for a session), so it carries its own guard against
//! a forged request, checked before the body is read where it can be:
//! - a session must be open (its cookie is `SameSite=Strict`, so a
//!   browser does not send it from another site's page at all);
//! - the `Origin` header must name this API's own host: browsers always
//!   send it with a POST, and a page elsewhere cannot change it;
//! - the form's hidden `csrf` field must equal the session's own random
//!   token (compared in constant time), which only a page vigie served to
//!   that session holds.
//!
//! Without `[api] token_file` there are no sessions, and, as for silences
//! over TCP, nothing may be changed through the listener: the page says
//! how to write an update on the daemon's machine instead.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Extension;
use time::OffsetDateTime;

use super::super::incidents::add_to;
use super::super::{auth, body, ApiState};
use super::incidents::Records;
use super::render::{self, incident_address, Form};
use super::streaks::StreakCache;
use super::view::Incident;
use super::{footer, page, store_failed};
use crate::alert::{IncidentId, KnownIncident, Policy};
use crate::incident_update::UpdateState;

/// `GET /incidents/{key}`.
pub(super) async fn incident(
    State(state): State<ApiState>,
    Extension(cache): Extension<Arc<StreakCache>>,
    Path(key): Path<String>,
    request: Request,
) -> Response {
    let csrf = auth::session_csrf(&request, &state.token);
    let form = match &csrf {
        Some(csrf) => Form::Open {
            csrf,
            problem: None,
            state: UpdateState::Investigating,
            text: "",
        },
        None => Form::Closed,
    };
    let now = state.clock.now();
    match find(&state, cache, &key, now).await {
        Ok(Some(incident)) => page(
            StatusCode::OK,
            render::incident_page(&incident, &form, now, &footer(&state, now)),
        ),
        Ok(None) => no_such_incident(&state, &key, now),
        Err(response) => response,
    }
}

/// `POST /incidents/{key}/updates`: see the module docs for who may.
pub(super) async fn post_update(
    State(state): State<ApiState>,
    Extension(cache): Extension<Arc<StreakCache>>,
    Path(key): Path<String>,
    request: Request,
) -> Response {
    if let Some(refused) = auth::refuse_change(&state, &request, "incident updates") {
        return refused;
    }
    let Some(csrf) = auth::session_csrf(&request, &state.token) else {
        return refused("log in at /login first: this form needs a session");
    };
    if !same_origin(request.headers()) {
        return refused(
            "the form was not sent from vigie's own page (its Origin is another site's, or none): \
             open the incident's page and post from there",
        );
    }
    let what = "POST /incidents/{key}/updates";
    let form = match body::read(request.into_body(), body::UPDATE_LIMIT, what).await {
        Ok(bytes) => bytes,
        Err(too_large) => return (too_large.status, too_large.message).into_response(),
    };
    let fields: HashMap<String, String> = url::form_urlencoded::parse(&form).into_owned().collect();
    let field = |name: &str| fields.get(name).map_or("", String::as_str);
    if !auth::constant_time_eq(field("csrf").as_bytes(), csrf.as_bytes()) {
        return refused(
            "the form's anti-forgery token is not this session's: reload the incident's page and post again",
        );
    }
    let now = state.clock.now();
    let incident = match find(&state, cache, &key, now).await {
        Ok(Some(incident)) => incident,
        Ok(None) => return no_such_incident(&state, &key, now),
        Err(response) => return response,
    };
    let text = field("text");
    let chosen = field("state").parse::<UpdateState>();
    let again = |problem: &str, code: StatusCode| {
        let form = Form::Open {
            csrf: &csrf,
            problem: Some(problem),
            state: *chosen.as_ref().unwrap_or(&UpdateState::Investigating),
            text,
        };
        page(
            code,
            render::incident_page(&incident, &form, now, &footer(&state, now)),
        )
    };
    let chosen = match &chosen {
        Ok(chosen) => *chosen,
        Err(why) => return again(why, StatusCode::UNPROCESSABLE_ENTITY),
    };
    // The incident this page shows, as the page found it: one that paged
    // nobody (silenced) has no record the API's lookup could find.
    let shown = KnownIncident {
        key: incident
            .key
            .clone()
            .unwrap_or_else(|| IncidentId::from_key(&key)),
        check: incident.check.clone(),
        since: incident.start,
        open: incident.end.is_none(),
    };
    match add_to(&state, shown, chosen, text).await {
        Ok(_) => Redirect::to(&incident_address(&key)).into_response(),
        // The text, or an incident with all the updates it keeps: the form
        // says why and keeps what was written.
        Err(refused) if refused.status.is_client_error() => {
            again(&refused.message, StatusCode::UNPROCESSABLE_ENTITY)
        }
        Err(refused) => (refused.status, refused.message).into_response(),
    }
}

/// The incident `key` names, with its told channels and updates; the
/// answer to give when the store cannot be read.
async fn find(
    state: &ApiState,
    cache: Arc<StreakCache>,
    key: &str,
    now: OffsetDateTime,
) -> Result<Option<Incident>, Response> {
    let config = state.config.borrow().clone();
    let newest = state
        .latest
        .get(IncidentId::from_key(key).check())
        .map(|o| o.started_at);
    let store = state.store.clone();
    let told = state.told.clone();
    let updates = state.updates.clone();
    let key = key.to_string();
    let found = tokio::task::spawn_blocking(move || {
        let policies = Policy::of_every_check(&config);
        let records = Records {
            store: store.as_ref(),
            told: told.as_ref(),
            updates: updates.as_ref(),
            policies: &policies,
        };
        records.find(&cache, &key, newest, now)
    })
    .await;
    match found {
        Ok(Ok(found)) => Ok(found),
        Ok(Err(err)) => Err(store_failed(err)),
        Err(_) => Err((
            StatusCode::INTERNAL_SERVER_ERROR,
            "the page panicked; see vigie's log",
        )
            .into_response()),
    }
}

fn no_such_incident(state: &ApiState, key: &str, now: OffsetDateTime) -> Response {
    page(
        StatusCode::NOT_FOUND,
        render::no_such_incident(key, &footer(state, now)),
    )
}

fn refused(why: &str) -> Response {
    (StatusCode::FORBIDDEN, why.to_string()).into_response()
}

/// Whether the request's `Origin` names the host it was sent to. Only the
/// host and port are compared: behind a proxy that ends TLS, the browser's
/// scheme is not the listener's.
fn same_origin(headers: &HeaderMap) -> bool {
    let named = |name| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_ascii_lowercase)
    };
    let (Some(origin), Some(host)) = (named(header::ORIGIN), named(header::HOST)) else {
        return false;
    };
    origin
        .split_once("://")
        .is_some_and(|(_, authority)| authority == host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(origin: Option<&str>, host: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, host.parse().unwrap());
        if let Some(origin) = origin {
            headers.insert(header::ORIGIN, origin.parse().unwrap());
        }
        headers
    }

    #[test]
    fn only_a_post_from_vigies_own_pages_passes_the_origin_check() {
        assert!(same_origin(&headers(
            Some("http://127.0.0.1:9464"),
            "127.0.0.1:9464"
        )));
        assert!(same_origin(&headers(
            Some("https://vigie.example.net"),
            "vigie.example.net"
        )));
        assert!(!same_origin(&headers(
            Some("https://evil.example"),
            "127.0.0.1:9464"
        )));
        assert!(!same_origin(&headers(
            Some("http://127.0.0.1:9465"),
            "127.0.0.1:9464"
        )));
        assert!(!same_origin(&headers(Some("null"), "127.0.0.1:9464")));
        assert!(!same_origin(&headers(None, "127.0.0.1:9464")));
    }
}
