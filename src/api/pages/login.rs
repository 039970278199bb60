//! `/login` and the rule for the pages: a browser session or the bearer
//! token, when a token is in force. The form is the only way in for a
//! browser; the token never rides in an address, where browser history
//! would keep it.

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

use super::super::peer::Peer;
use super::super::{auth, body, session, throttle, ApiState};
use super::{page, render};

pub(super) async fn require_session(
    State(state): State<ApiState>,
    request: Request,
    next: Next,
) -> Response {
    if state.token.current().is_none() {
        return next.run(request).await;
    }
    let by_cookie = auth::has_session(&request, &state.token);
    let by_bearer = auth::bearer(request.headers()).is_some_and(|t| state.token.matches(t));
    match by_cookie || by_bearer {
        true => next.run(request).await,
        false => Redirect::to("/login").into_response(),
    }
}

pub(super) async fn login_form() -> Response {
    page(StatusCode::OK, render::login(None))
}

/// `POST /login`: counted against the client's attempts before its body
/// is read, then the form (`token=...`, at most [`body::LOGIN_LIMIT`]).
pub(super) async fn login(State(state): State<ApiState>, request: Request) -> Response {
    if state.token.current().is_none() {
        return Redirect::to("/").into_response();
    }
    let peer = request.extensions().get::<Peer>().copied();
    if let Err(wait) = state
        .token
        .logins()
        .attempt(peer.and_then(|p| p.addr).map(|a| a.ip()))
    {
        let secs = wait.as_secs().max(1);
        let message = format!(
            "Too many attempts: {} a minute at most. Try again in {secs} s.",
            throttle::ATTEMPTS
        );
        let mut response = page(StatusCode::TOO_MANY_REQUESTS, render::login(Some(&message)));
        if let Ok(value) = HeaderValue::from_str(&secs.to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        return response;
    }
    let form = match body::read(request.into_body(), body::LOGIN_LIMIT, "/login").await {
        Ok(form) => form,
        Err(refused) => {
            let mut response = page(refused.status, render::login(Some(&refused.message)));
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            return response;
        }
    };
    let offered = url::form_urlencoded::parse(&form)
        .find(|(key, _)| key == "token")
        .map(|(_, value)| value.into_owned())
        .unwrap_or_default();
    if !state.token.matches(&offered) {
        return page(
            StatusCode::UNAUTHORIZED,
            render::login(Some("That is not the token.")),
        );
    }
    let ttl = state.config.borrow().api.session_ttl;
    let Some(id) = state.token.sessions().open(ttl) else {
        tracing::error!("no session could be made: the system's random source failed");
        return page(
            StatusCode::SERVICE_UNAVAILABLE,
            render::login(Some("No session could be made (see vigie's log).")),
        );
    };
    let tls = peer.is_some_and(|p| p.tls);
    let mut response = Redirect::to("/").into_response();
    if let Ok(value) = HeaderValue::from_str(&session::set_cookie(&id, ttl, tls)) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}
