//! An ntfy-compatible server: the publish API as ntfy documents it
//! (docs/publish.md) and implements it (server/server.go, server/errors.go),
//! with the notification updates of ntfy 2.16.
//!
//! Publishing: `POST`/`PUT /{topic}` with the message as the body and its
//! fields in headers or query parameters under ntfy's names and aliases
//! (`X-Title`/`Title`/`ti`/`t`, `X-Priority`/`Priority`/`prio`/`p` as 1-5
//! or min/low/default/high/max/urgent, `X-Tags`/`Tags`/`tag`/`ta`,
//! `X-Click`/`Click`, `X-Markdown`/`Markdown`/`md` or `Content-Type:
//! text/markdown`, `X-Message`/`Message`/`m`); or `POST /` with a JSON body
//! (`topic`, `message`, `title`, `priority`, `tags`, `click`, `markdown`,
//! `sequence_id`), which ntfy turns into the same headers. An empty message
//! is "triggered". The answer is 200 with the message as JSON (`id`,
//! `time`, `expires`, `event: "message"`, `topic`, and the fields set).
//!
//! Updating in place: messages with the same sequence id are one
//! notification on a phone, showing the latest. The id comes from the path
//! (`/{topic}/{sequence_id}`), the `X-Sequence-ID`/`Sequence-ID`/`SID`
//! header, or the JSON `sequence_id`; without one a message is its own
//! notification (its `id` serves as the sequence id of later updates).
//! `PUT /{topic}/{sequence_id}/clear` dismisses it (event `message_clear`),
//! `DELETE /{topic}/{sequence_id}` deletes it (event `message_delete`).
//! [`NtfyServer::notifications`] is what a phone shows.
//!
//! Auth, limits and errors as ntfy checks them, in its order. With users
//! or tokens configured (ntfy's `auth-file` with `auth-default-access:
//! deny-all`), a wrong token or password is 401 (40101); without, ntfy
//! reads no credentials and neither does this server. Then the visitor's
//! request limiter (42901); then an anonymous publisher where users are
//! configured is 403 (40301); then the publish parameters (400, e.g.
//! 40007); then the daily message quota (42908). Errors are ntfy's JSON
//! bodies, byte for byte.
//!
//! Not implemented: subscribing (`/json`, `/sse`, `/ws`: tests read
//! [`NtfyServer::messages`]), attachments (a body over ntfy's 4096-byte
//! message limit, which ntfy would keep as an attachment, is refused with
//! 41301), actions, icons, e-mail and calls, delays, templates, access
//! lists per topic (every configured user may publish everywhere), the
//! quota's reset at midnight.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hyper::HeaderMap;
use serde::{Deserialize, Serialize};

use super::{random_alphanumeric, reason, Answer, Protocol, PushPeer, Received};

/// An ntfy server; see the module doc.
pub type NtfyServer = PushPeer<Ntfy>;

/// ntfy's message size limit (`message-size-limit`).
pub const MESSAGE_LIMIT: usize = 4096;

/// How long ntfy caches a message (`cache-duration`), as `expires` shows.
const CACHE_SECS: i64 = 12 * 3600;

/// What the server accepts.
#[derive(Clone, Debug, Default)]
pub struct NtfyConfig {
    /// Users and passwords accepted as Basic auth.
    pub users: Vec<(String, String)>,
    /// Access tokens accepted as `Authorization: Bearer`.
    pub tokens: Vec<String>,
    /// ntfy's visitor request limiter; None: no limit.
    pub request_limit: Option<RateLimit>,
    /// ntfy's daily message quota (`visitor-message-daily-limit`): how many
    /// messages are accepted before 42908; None: no quota.
    pub daily_messages: Option<u32>,
}

/// A token bucket: `burst` requests at once, one more every `every`
/// (ntfy's `visitor-request-limit-burst` and `-replenish`), on tokio time.
#[derive(Clone, Copy, Debug)]
pub struct RateLimit {
    pub burst: u32,
    pub every: Duration,
}

/// A message as ntfy answers and keeps it (its `message` type, the fields
/// this server sets; empty ones are left out of the JSON as ntfy does).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NtfyMessage {
    pub id: String,
    pub time: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub expires: i64,
    /// `message`, `message_clear` or `message_delete`.
    pub event: String,
    pub topic: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// 1 to 5; 0 when not given (a phone shows 3).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub click: String,
    /// `text/markdown` when the message is Markdown.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub content_type: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sequence_id: String,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

impl NtfyMessage {
    /// The notification it belongs to: its sequence id, or its own id.
    pub fn notification_key(&self) -> &str {
        if self.sequence_id.is_empty() {
            &self.id
        } else {
            &self.sequence_id
        }
    }
}

/// One of ntfy's errors (server/errors.go): its JSON body is the answer,
/// fields in ntfy's order (`code`, `http`, `error`, `link` when set).
#[derive(Serialize)]
struct NtfyError {
    code: u32,
    http: u16,
    error: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    link: &'static str,
}

const AUTH_LINK: &str = "https://ntfy.sh/docs/publish/#authentication";
const LIMITS_LINK: &str = "https://ntfy.sh/docs/publish/#limitations";

const BAD_REQUEST: NtfyError = error(40000, 400, "invalid request", "");
const TOPIC_INVALID: NtfyError = error(40009, 400, "invalid request: topic invalid", "");
const PRIORITY_INVALID: NtfyError = error(
    40007,
    400,
    "invalid priority parameter",
    "https://ntfy.sh/docs/publish/#message-priority",
);
const NOT_UTF8: NtfyError = error(
    40011,
    400,
    "invalid request: message must be UTF-8 encoded",
    "",
);
const JSON_INVALID: NtfyError = error(
    40017,
    400,
    "invalid request: request body must be message JSON",
    "https://ntfy.sh/docs/publish/#publish-as-json",
);
const NOT_FOUND: NtfyError = error(40401, 404, "page not found", "");
const UNAUTHORIZED: NtfyError = error(40101, 401, "unauthorized", AUTH_LINK);
const FORBIDDEN: NtfyError = error(40301, 403, "forbidden", AUTH_LINK);
const TOO_LARGE: NtfyError = error(
    41301,
    413,
    "attachment too large, or bandwidth limit reached",
    LIMITS_LINK,
);
const TOO_MANY_REQUESTS: NtfyError =
    error(42901, 429, "limit reached: too many requests", LIMITS_LINK);
const DAILY_QUOTA: NtfyError = error(
    42908,
    429,
    "limit reached: daily message quota reached",
    LIMITS_LINK,
);
const INTERNAL: NtfyError = error(50001, 500, "internal server error", "");
const UNIFIEDPUSH: NtfyError = error(
    50701,
    507,
    "cannot publish to UnifiedPush topic without previously active subscriber",
    "",
);

const fn error(code: u32, http: u16, error: &'static str, link: &'static str) -> NtfyError {
    NtfyError {
        code,
        http,
        error,
        link,
    }
}

impl NtfyError {
    /// ntfy's `handleError`: the error's JSON, a newline,
    /// `Access-Control-Allow-Origin: *`.
    fn answer(&self) -> Answer {
        let body = serde_json::to_string(self).expect("an error serializes");
        let mut answer = Answer::new(self.http, "application/json", format!("{body}\n"));
        answer
            .headers
            .push(("access-control-allow-origin".to_owned(), "*".to_owned()));
        answer
    }
}

/// The server's protocol state.
pub struct Ntfy {
    config: NtfyConfig,
    state: Mutex<State>,
}

struct State {
    /// Requests left in the bucket, and when it was last refilled.
    tokens: f64,
    refilled: tokio::time::Instant,
    /// Messages accepted, for the daily quota.
    accepted: u32,
    /// Every message, clear and delete accepted, in order.
    messages: Vec<NtfyMessage>,
}

impl PushPeer<Ntfy> {
    /// A server accepting what `config` allows.
    pub fn start(config: NtfyConfig) -> NtfyServer {
        let tokens = config.request_limit.map_or(0.0, |l| f64::from(l.burst));
        PushPeer::serve(Ntfy {
            config,
            state: Mutex::new(State {
                tokens,
                refilled: tokio::time::Instant::now(),
                accepted: 0,
                messages: Vec::new(),
            }),
        })
    }

    /// `http://127.0.0.1:{port}/{topic}`.
    pub fn topic_url(&self, topic: &str) -> String {
        format!("{}/{topic}", self.url())
    }

    /// Every message, clear and delete accepted on `topic`, in order.
    pub fn messages(&self, topic: &str) -> Vec<NtfyMessage> {
        let state = self.protocol().state.lock().unwrap();
        state
            .messages
            .iter()
            .filter(|m| m.topic == topic)
            .cloned()
            .collect()
    }

    /// The notifications a phone subscribed to `topic` shows: one per
    /// sequence id with its latest content, in order of first arrival;
    /// cleared and deleted ones gone.
    pub fn notifications(&self, topic: &str) -> Vec<NtfyMessage> {
        let mut shown: Vec<NtfyMessage> = Vec::new();
        for message in self.messages(topic) {
            let key = message.notification_key().to_owned();
            let at = shown.iter().position(|m| m.notification_key() == key);
            match (message.event.as_str(), at) {
                ("message", Some(at)) => shown[at] = message,
                ("message", None) => shown.push(message),
                (_, Some(at)) => {
                    shown.remove(at);
                }
                (_, None) => {}
            }
        }
        shown
    }
}

/// What a request asks for, from its method and path.
enum Route {
    /// `POST /` with a JSON body.
    Json,
    Publish {
        topic: String,
        sequence_id: Option<String>,
    },
    Clear {
        topic: String,
        sequence_id: String,
    },
    Delete {
        topic: String,
        sequence_id: String,
    },
}

fn route(method: &str, path: &str) -> Option<Route> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let publishing = method == "POST" || method == "PUT";
    let route = match (segments.as_slice(), method) {
        ([""], _) if publishing => Route::Json,
        ([topic], _) if publishing => Route::Publish {
            topic: valid_name(topic)?,
            sequence_id: None,
        },
        ([topic, sid], _) if publishing => Route::Publish {
            topic: valid_name(topic)?,
            sequence_id: Some(valid_name(sid)?),
        },
        ([topic, sid, "clear"], _) if publishing => Route::Clear {
            topic: valid_name(topic)?,
            sequence_id: valid_name(sid)?,
        },
        ([topic, sid], "DELETE") => Route::Delete {
            topic: valid_name(topic)?,
            sequence_id: valid_name(sid)?,
        },
        _ => return None,
    };
    Some(route)
}

/// ntfy's topic rule, which sequence ids follow too: 1 to 64 of
/// `[-_A-Za-z0-9]`.
fn valid_name(name: &str) -> Option<String> {
    let valid = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    valid.then(|| name.to_owned())
}

/// The publish parameters ntfy reads: headers first, then query parameters
/// (`readParam`), under each of a field's names.
struct Params<'a> {
    headers: &'a HeaderMap,
    request: &'a Received,
}

impl Params<'_> {
    fn read(&self, names: &[&str]) -> Option<String> {
        let from_header = names.iter().find_map(|name| {
            let value = self.headers.get(*name)?.to_str().ok()?.trim();
            (!value.is_empty()).then(|| value.to_owned())
        });
        from_header.or_else(|| {
            names.iter().find_map(|name| {
                let value = self.request.query(name)?;
                let value = value.trim();
                (!value.is_empty()).then(|| value.to_owned())
            })
        })
    }

    fn flag(&self, names: &[&str]) -> bool {
        self.read(names)
            .is_some_and(|v| matches!(v.to_lowercase().as_str(), "1" | "yes" | "true"))
    }
}

/// ntfy's `util.ParsePriority`; None for an unknown word.
fn priority(text: Option<&str>) -> Option<i64> {
    let Some(text) = text else { return Some(0) };
    let priority = match text.trim().to_lowercase().as_str() {
        "" => 0,
        "1" | "min" => 1,
        "2" | "low" => 2,
        "3" | "default" => 3,
        "4" | "high" => 4,
        "5" | "max" | "urgent" => 5,
        _ => return None,
    };
    Some(priority)
}

/// The JSON publish body (ntfy's `publishMessage`, the fields kept here).
#[derive(Deserialize)]
struct JsonPublish {
    topic: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    priority: i64,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    click: String,
    #[serde(default)]
    markdown: bool,
    #[serde(default)]
    sequence_id: String,
}

impl Ntfy {
    /// ntfy's `maybeAuthenticate`: Ok(true) for a known user or token,
    /// Ok(false) for an anonymous visitor, Err for wrong credentials.
    fn authenticate(&self, request: &Received) -> Result<bool, NtfyError> {
        let Some(header) = request.header("authorization").map(str::trim) else {
            return Ok(false);
        };
        if let Some(token) = header.strip_prefix("Bearer") {
            let known = self.config.tokens.iter().any(|t| t == token.trim());
            return if known { Ok(true) } else { Err(UNAUTHORIZED) };
        }
        let Some(encoded) = header.strip_prefix("Basic ") else {
            return Ok(false);
        };
        let decoded = STANDARD.decode(encoded.trim()).unwrap_or_default();
        let pair = String::from_utf8(decoded).unwrap_or_default();
        let known = pair.split_once(':').is_some_and(|(user, password)| {
            self.config
                .users
                .iter()
                .any(|(u, p)| u == user && p == password)
        });
        if known {
            Ok(true)
        } else {
            Err(UNAUTHORIZED)
        }
    }

    /// The visitor's request limiter: take one token, refilled on tokio
    /// time.
    fn request_allowed(&self, state: &mut State) -> bool {
        let Some(limit) = self.config.request_limit else {
            return true;
        };
        let now = tokio::time::Instant::now();
        let refill = now.duration_since(state.refilled).as_secs_f64() / limit.every.as_secs_f64();
        state.tokens = (state.tokens + refill).min(f64::from(limit.burst));
        state.refilled = now;
        if state.tokens < 1.0 {
            return false;
        }
        state.tokens -= 1.0;
        true
    }

    fn handle(&self, request: &Received) -> Result<NtfyMessage, NtfyError> {
        let route = route(&request.method, request.path()).ok_or(NOT_FOUND)?;
        // Without users, ntfy has no user manager and never reads
        // `Authorization`: any credentials pass, as none do.
        let auth_configured = !self.config.users.is_empty() || !self.config.tokens.is_empty();
        let user = auth_configured && self.authenticate(request)?;
        let mut state = self.state.lock().unwrap();
        if !self.request_allowed(&mut state) {
            return Err(TOO_MANY_REQUESTS);
        }
        if auth_configured && !user {
            return Err(FORBIDDEN);
        }
        let message = match route {
            Route::Json => publish_json(request)?,
            Route::Publish { topic, sequence_id } => publish(
                &topic,
                sequence_id,
                &request.headers,
                request,
                &request.body,
            )?,
            Route::Clear { topic, sequence_id } => event("message_clear", &topic, &sequence_id),
            Route::Delete { topic, sequence_id } => event("message_delete", &topic, &sequence_id),
        };
        if self
            .config
            .daily_messages
            .is_some_and(|q| state.accepted >= q)
        {
            return Err(DAILY_QUOTA);
        }
        state.accepted += 1;
        state.messages.push(message.clone());
        Ok(message)
    }
}

/// ntfy's `transformBodyJSON`: the JSON fields become the headers of a
/// publish to its topic, the message its body.
fn publish_json(request: &Received) -> Result<NtfyMessage, NtfyError> {
    let body: JsonPublish = serde_json::from_slice(&request.body).map_err(|_| JSON_INVALID)?;
    let topic = valid_name(&body.topic).ok_or(TOPIC_INVALID)?;
    let mut headers = request.headers.clone();
    let mut set = |name: &'static str, value: String| {
        if !value.is_empty() {
            let value = value.parse().map_err(|_| BAD_REQUEST)?;
            headers.insert(name, value);
        }
        Ok::<_, NtfyError>(())
    };
    set("x-title", body.title)?;
    if body.priority != 0 {
        set("x-priority", body.priority.to_string())?;
    }
    set("x-tags", body.tags.join(","))?;
    set("x-click", body.click)?;
    if body.markdown {
        set("x-markdown", "yes".to_owned())?;
    }
    set("x-sequence-id", body.sequence_id)?;
    let message = if body.message.is_empty() {
        "triggered".to_owned()
    } else {
        body.message
    };
    publish(&topic, None, &headers, request, message.as_bytes())
}

/// ntfy's `handlePublishInternal` for a text message.
fn publish(
    topic: &str,
    path_sequence_id: Option<String>,
    headers: &HeaderMap,
    request: &Received,
    body: &[u8],
) -> Result<NtfyMessage, NtfyError> {
    let params = Params { headers, request };
    let priority = priority(
        params
            .read(&["x-priority", "priority", "prio", "p"])
            .as_deref(),
    )
    .ok_or(PRIORITY_INVALID)?;
    let sequence_id = match path_sequence_id {
        Some(sid) => sid,
        None => match params.read(&["x-sequence-id", "sequence-id", "sid"]) {
            Some(sid) => valid_name(&sid).ok_or(BAD_REQUEST)?,
            None => String::new(),
        },
    };
    if body.len() > MESSAGE_LIMIT {
        return Err(TOO_LARGE);
    }
    let text = std::str::from_utf8(body).map_err(|_| NOT_UTF8)?.trim();
    let message = match (text, params.read(&["x-message", "message", "m"])) {
        ("", Some(param)) => param.replace("\\n", "\n"),
        ("", None) => "triggered".to_owned(),
        (text, _) => text.to_owned(),
    };
    let markdown = params.flag(&["x-markdown", "markdown", "md"])
        || params
            .read(&["content-type"])
            .is_some_and(|t| t.eq_ignore_ascii_case("text/markdown"));
    let tags = params
        .read(&["x-tags", "tags", "tag", "ta"])
        .map(|tags| {
            tags.split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let time = unix_now();
    Ok(NtfyMessage {
        id: random_alphanumeric(12),
        time,
        expires: time + CACHE_SECS,
        event: "message".to_owned(),
        topic: topic.to_owned(),
        title: params
            .read(&["x-title", "title", "ti", "t"])
            .unwrap_or_default(),
        message,
        priority,
        tags,
        click: params.read(&["x-click", "click"]).unwrap_or_default(),
        content_type: if markdown { "text/markdown" } else { "" }.to_owned(),
        sequence_id,
    })
}

/// A `message_clear` or `message_delete` for `sequence_id`.
fn event(event: &str, topic: &str, sequence_id: &str) -> NtfyMessage {
    let time = unix_now();
    NtfyMessage {
        id: random_alphanumeric(12),
        time,
        expires: time + CACHE_SECS,
        event: event.to_owned(),
        topic: topic.to_owned(),
        sequence_id: sequence_id.to_owned(),
        ..NtfyMessage::default()
    }
}

fn unix_now() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH);
    since.map_or(0, |d| d.as_secs() as i64)
}

impl Protocol for Ntfy {
    const NAME: &'static str = "ntfy server";

    fn endpoint(&self) -> String {
        String::new()
    }

    fn answer(&self, request: &Received) -> Answer {
        match self.handle(request) {
            Ok(message) => {
                let body = serde_json::to_string(&message).expect("a message serializes");
                Answer::new(200, "application/json", format!("{body}\n"))
            }
            Err(error) => error.answer(),
        }
    }

    /// ntfy's error for the status: 42901 for 429, 40101 for 401, and so
    /// on; a status ntfy has no error for gets `{"code":<status>01, ...}`
    /// with the status's reason phrase.
    fn scripted(&self, status: u16) -> Answer {
        let known = [
            BAD_REQUEST,
            UNAUTHORIZED,
            FORBIDDEN,
            NOT_FOUND,
            TOO_LARGE,
            TOO_MANY_REQUESTS,
            INTERNAL,
            UNIFIEDPUSH,
        ];
        match known.into_iter().find(|e| e.http == status) {
            Some(error) => error.answer(),
            None => NtfyError {
                code: u32::from(status) * 100 + 1,
                http: status,
                error: reason(status),
                link: "",
            }
            .answer(),
        }
    }
}
