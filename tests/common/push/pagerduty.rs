//! A stand-in for PagerDuty's Events API v2 (developer.pagerduty.com,
//! "Events API v2 Overview" and "Send an Alert Event"): `POST /v2/enqueue`
//! with a JSON event.
//!
//! Checked as the documented API checks: `routing_key` (32 characters),
//! `event_action` (`trigger`, `acknowledge` or `resolve`), `dedup_key`
//! (required to acknowledge or resolve, at most 255 characters), and for a
//! trigger a `payload` with `summary` (at most 1024 characters), `source`
//! and `severity` (`critical`, `error`, `warning` or `info`), an RFC 3339
//! `timestamp` if given, and `links`/`images` as arrays of objects with an
//! `href`/`src`. A valid event is answered 202 `{"status":"success",
//! "message":"Event processed","dedup_key":...}` (a trigger without a key
//! is given a fresh one); an invalid one 400 `{"status":"invalid event",
//! "message":"Event object is invalid","errors":[...]}`, naming every
//! problem.
//!
//! Incidents are kept by `dedup_key` as PagerDuty keeps them: a trigger
//! opens one unless one with that key is open (then it is deduplicated
//! into it), acknowledge and resolve change the open one and are accepted
//! without effect when none is open; a trigger after a resolve opens a new
//! incident.
//!
//! Not implemented: the wording of each entry of `errors` is this
//! stand-in's own (PagerDuty does not publish its list); change events
//! (`/v2/change/enqueue`); routing keys bound to services (any 32-character
//! key is accepted); the body of PagerDuty's 429, which is the stand-in's
//! own JSON.

use std::sync::Mutex;

use serde_json::{json, Value};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::{random_bytes, reason, Answer, Protocol, PushPeer, Received};

/// The Events API v2; see the module doc.
pub type PagerDutyEvents = PushPeer<PagerDuty>;

/// The longest `payload.summary` the API takes.
pub const SUMMARY_LIMIT: usize = 1024;
/// The longest `dedup_key` the API takes.
pub const DEDUP_KEY_LIMIT: usize = 255;

/// `event_action`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventAction {
    Trigger,
    Acknowledge,
    Resolve,
}

/// Where an incident stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncidentState {
    Triggered,
    Acknowledged,
    Resolved,
}

/// One incident, opened by a trigger.
#[derive(Clone, Debug)]
pub struct Incident {
    pub routing_key: String,
    pub dedup_key: String,
    pub state: IncidentState,
    /// The opening trigger's `payload.summary` and `payload.severity`.
    pub summary: String,
    pub severity: String,
    /// Every event applied to it, the opening trigger first.
    pub actions: Vec<EventAction>,
}

/// An event the API accepted.
#[derive(Clone, Debug)]
pub struct PagerDutyEvent {
    pub action: EventAction,
    /// As sent, or given by the API to a trigger without one.
    pub dedup_key: String,
    pub body: Value,
}

/// The API's state.
pub struct PagerDuty {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    events: Vec<PagerDutyEvent>,
    incidents: Vec<Incident>,
}

impl PushPeer<PagerDuty> {
    /// An Events API with no incidents yet.
    pub fn start() -> PagerDutyEvents {
        PushPeer::serve(PagerDuty {
            state: Mutex::new(State::default()),
        })
    }

    /// Every accepted event, in order.
    pub fn events(&self) -> Vec<PagerDutyEvent> {
        self.protocol().state.lock().unwrap().events.clone()
    }

    /// Every incident, in order of opening.
    pub fn incidents(&self) -> Vec<Incident> {
        self.protocol().state.lock().unwrap().incidents.clone()
    }

    /// The incidents with `dedup_key`, in order of opening.
    pub fn incidents_with_key(&self, dedup_key: &str) -> Vec<Incident> {
        let incidents = self.incidents();
        incidents
            .into_iter()
            .filter(|i| i.dedup_key == dedup_key)
            .collect()
    }
}

/// A checked event.
struct Event {
    routing_key: String,
    action: EventAction,
    dedup_key: Option<String>,
    summary: String,
    severity: String,
}

/// Every problem of `body` as an event, or the event.
fn check(body: &Value) -> Result<Event, Vec<String>> {
    let mut errors = Vec::new();
    let text = |value: &Value, name: &str| -> Option<String> {
        value
            .get(name)
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .map(str::to_owned)
    };
    let routing_key = text(body, "routing_key");
    match &routing_key {
        None => errors.push("'routing_key' is missing or blank".to_owned()),
        Some(key) if key.chars().count() != 32 => {
            errors.push("Length of 'routing_key' is incorrect (should be 32 characters)".to_owned())
        }
        Some(_) => {}
    }
    let action = match text(body, "event_action").as_deref() {
        None => {
            errors.push("'event_action' is missing or blank".to_owned());
            None
        }
        Some("trigger") => Some(EventAction::Trigger),
        Some("acknowledge") => Some(EventAction::Acknowledge),
        Some("resolve") => Some(EventAction::Resolve),
        Some(_) => {
            errors.push(
                "'event_action' is invalid (must be one of the following: 'trigger', 'acknowledge' or 'resolve')"
                    .to_owned(),
            );
            None
        }
    };
    let dedup_key = text(body, "dedup_key");
    if dedup_key
        .as_ref()
        .is_some_and(|k| k.chars().count() > DEDUP_KEY_LIMIT)
    {
        errors.push(format!(
            "Length of 'dedup_key' is incorrect (should be at most {DEDUP_KEY_LIMIT} characters)"
        ));
    }
    if dedup_key.is_none()
        && matches!(
            action,
            Some(EventAction::Acknowledge | EventAction::Resolve)
        )
    {
        errors.push("'dedup_key' is missing or blank".to_owned());
    }
    let (summary, severity) = if action == Some(EventAction::Trigger) {
        check_payload(body.get("payload"), &mut errors)
    } else {
        (String::new(), String::new())
    };
    check_list(body, "links", "href", &mut errors);
    check_list(body, "images", "src", &mut errors);
    match (routing_key, action) {
        (Some(routing_key), Some(action)) if errors.is_empty() => Ok(Event {
            routing_key,
            action,
            dedup_key,
            summary,
            severity,
        }),
        _ => Err(errors),
    }
}

/// A trigger's `payload`: its summary and severity, problems into `errors`.
fn check_payload(payload: Option<&Value>, errors: &mut Vec<String>) -> (String, String) {
    let Some(payload) = payload.filter(|p| p.is_object()) else {
        errors.push("'payload' is missing or not an object".to_owned());
        return (String::new(), String::new());
    };
    let field = |name: &str| {
        payload
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let summary = field("summary");
    if summary.trim().is_empty() {
        errors.push("'payload.summary' is missing or blank".to_owned());
    } else if summary.chars().count() > SUMMARY_LIMIT {
        errors.push(format!(
            "Length of 'payload.summary' is incorrect (should be at most {SUMMARY_LIMIT} characters)"
        ));
    }
    if field("source").trim().is_empty() {
        errors.push("'payload.source' is missing or blank".to_owned());
    }
    let severity = field("severity");
    match severity.as_str() {
        "critical" | "error" | "warning" | "info" => {}
        "" => errors.push("'payload.severity' is missing or blank".to_owned()),
        _ => errors.push(
            "'payload.severity' is invalid (must be one of the following: 'critical', 'warning', 'error' or 'info')"
                .to_owned(),
        ),
    }
    if let Some(timestamp) = payload.get("timestamp") {
        let parses = timestamp
            .as_str()
            .is_some_and(|t| OffsetDateTime::parse(t, &Rfc3339).is_ok());
        if !parses {
            errors.push("'payload.timestamp' is invalid (should be an ISO 8601 date)".to_owned());
        }
    }
    (summary, severity)
}

/// `links` or `images`, when present: an array of objects with `key`.
fn check_list(body: &Value, name: &str, key: &str, errors: &mut Vec<String>) {
    let Some(list) = body.get(name) else { return };
    let Some(items) = list.as_array() else {
        errors.push(format!("'{name}' must be an array"));
        return;
    };
    for (i, item) in items.iter().enumerate() {
        if item.get(key).and_then(Value::as_str).is_none() {
            errors.push(format!("'{name}[{i}].{key}' is missing or blank"));
        }
    }
}

impl State {
    /// Apply an accepted event to the incidents; returns its dedup key.
    fn apply(&mut self, event: Event, body: Value) -> String {
        let dedup_key = event.dedup_key.unwrap_or_else(|| hex(&random_bytes(16)));
        let open = self.incidents.iter_mut().find(|i| {
            i.routing_key == event.routing_key
                && i.dedup_key == dedup_key
                && i.state != IncidentState::Resolved
        });
        match (event.action, open) {
            (action, Some(incident)) => {
                incident.actions.push(action);
                match action {
                    EventAction::Trigger => {}
                    EventAction::Acknowledge => incident.state = IncidentState::Acknowledged,
                    EventAction::Resolve => incident.state = IncidentState::Resolved,
                }
            }
            (EventAction::Trigger, None) => self.incidents.push(Incident {
                routing_key: event.routing_key,
                dedup_key: dedup_key.clone(),
                state: IncidentState::Triggered,
                summary: event.summary,
                severity: event.severity,
                actions: vec![EventAction::Trigger],
            }),
            (EventAction::Acknowledge | EventAction::Resolve, None) => {}
        }
        self.events.push(PagerDutyEvent {
            action: event.action,
            dedup_key: dedup_key.clone(),
            body,
        });
        dedup_key
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn invalid(errors: Vec<String>) -> Answer {
    Answer::json(
        400,
        &json!({"status": "invalid event", "message": "Event object is invalid", "errors": errors}),
    )
}

impl Protocol for PagerDuty {
    const NAME: &'static str = "PagerDuty Events API";

    fn endpoint(&self) -> String {
        "/v2/enqueue".to_owned()
    }

    fn answer(&self, request: &Received) -> Answer {
        if request.path() != "/v2/enqueue" {
            return Answer::text(404, "Not Found");
        }
        if request.method != "POST" {
            return Answer::text(405, "Method Not Allowed");
        }
        let body: Value = match serde_json::from_slice(&request.body) {
            Ok(body @ Value::Object(_)) => body,
            _ => return invalid(vec!["Event object is not valid JSON".to_owned()]),
        };
        let event = match check(&body) {
            Ok(event) => event,
            Err(errors) => return invalid(errors),
        };
        let dedup_key = self.state.lock().unwrap().apply(event, body);
        Answer::json(
            202,
            &json!({"status": "success", "message": "Event processed", "dedup_key": dedup_key}),
        )
    }

    fn scripted(&self, status: u16) -> Answer {
        match status {
            400 => invalid(vec!["Event object is invalid".to_owned()]),
            429 => Answer::json(
                429,
                &json!({"status": "throttle event", "message": "Requests for this service are arriving too quickly. Please retry later."}),
            ),
            _ => Answer::json(
                status,
                &json!({"status": reason(status), "message": reason(status)}),
            ),
        }
    }
}
