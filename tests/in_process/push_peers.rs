//! The loopback receivers of the push channels (`tests/common/push/`),
//! driven with reqwest as a client would drive the real services: signed
//! and badly signed webhooks, ntfy publishing, auth, limits and updates in
//! place, PagerDuty incidents, Slack's errors, and the scripting all four
//! share (planned answers in order, slow answers, waiting for requests).

use std::sync::Arc;
use std::time::Duration;

use crate::common::push::{
    sign, whsec_for_test, EventAction, IncidentState, NtfyConfig, NtfyMessage, NtfyServer,
    PagerDutyEvents, Plan, RateLimit, Refusal, SlackWebhook, WebhookReceiver,
};
use base64::Engine as _;
use serde_json::{json, Value};
use time::macros::datetime;
use vigie::clock::FakeClock;

const WAIT: Duration = Duration::from_secs(5);

fn client() -> reqwest::Client {
    vigie::net::api_client().expect("reqwest client")
}

/// Status and body text of a response.
async fn answer(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    (status, response.text().await.expect("body"))
}

/// Post `{"text": text}` to `slack`; its answer.
async fn say(slack: &SlackWebhook, text: &str) -> (u16, String) {
    let message = json!({ "text": text });
    answer(
        client()
            .post(slack.url())
            .json(&message)
            .send()
            .await
            .unwrap(),
    )
    .await
}

fn unix_now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

// ------------------------------------------------------------ scripting

#[tokio::test(flavor = "multi_thread")]
async fn plans_are_answered_in_order_then_the_peer_answers_normally() {
    let slack = SlackWebhook::start();
    slack.plan(Plan::status(500));
    slack.plan(Plan::status(429).header("retry-after", "7"));
    assert_eq!(say(&slack, "disk full").await, (500, "rollup_error".into()));
    let limited = client()
        .post(slack.url())
        .json(&json!({"text": "disk full"}))
        .send()
        .await
        .unwrap();
    assert_eq!(limited.headers()["retry-after"], "7");
    assert_eq!(answer(limited).await, (429, "rate_limited".into()));
    assert_eq!(slack.plans_left(), 0);
    assert_eq!(say(&slack, "disk full").await, (200, "ok".into()));

    // Scripted failures deliver nothing; every request is on record.
    assert_eq!(slack.messages().len(), 1);
    let received = slack.wait_for_requests(3, WAIT).await;
    assert_eq!(received.len(), 3);
    assert!(received.windows(2).all(|w| w[0].at <= w[1].at));
    let path = url::Url::parse(&slack.url()).unwrap().path().to_owned();
    assert!(received
        .iter()
        .all(|r| r.method == "POST" && r.path() == path));
    assert_eq!(received[2].header("content-type"), Some("application/json"));
    assert_eq!(
        serde_json::from_slice::<Value>(&received[2].body).unwrap(),
        json!({"text": "disk full"})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_outage_answers_its_status_until_its_time_is_up_and_plans_come_first() {
    let slack = SlackWebhook::start();
    let outage = Duration::from_millis(1500);
    let until = slack.fail_for(500, outage);
    slack.plan(Plan::status(429));
    assert_eq!(say(&slack, "disk full").await.0, 429, "a plan comes first");
    for _ in 0..3 {
        assert_eq!(say(&slack, "disk full").await, (500, "rollup_error".into()));
    }
    assert!(slack.messages().is_empty(), "nothing delivered meanwhile");
    tokio::time::sleep_until(until).await;
    assert_eq!(say(&slack, "disk full").await, (200, "ok".into()));
    assert_eq!(slack.messages().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_planned_body_replaces_the_protocols_own() {
    let slack = SlackWebhook::start();
    slack.plan(Plan::status(404).body("channel_not_found"));
    assert_eq!(say(&slack, "x").await, (404, "channel_not_found".into()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_answer_outlasts_a_client_that_gives_up() {
    let pagerduty = PagerDutyEvents::start();
    pagerduty.plan(Plan::normal().after(Duration::from_secs(30)));
    let impatient = vigie::net::service_client(None)
        .unwrap()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let error = impatient
        .post(pagerduty.url())
        .json(&trigger("slow"))
        .send()
        .await
        .unwrap_err();
    assert!(error.is_timeout(), "{error:?}");

    // The next request finds no plan left and is answered at once.
    let response = client()
        .post(pagerduty.url())
        .json(&trigger("fast"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    assert_eq!(pagerduty.wait_for_requests(2, WAIT).await.len(), 2);
    let keys: Vec<String> = pagerduty
        .incidents()
        .into_iter()
        .map(|i| i.dedup_key)
        .collect();
    assert_eq!(keys, ["fast"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_begun_first_returns_once_the_requests_arrive() {
    let ntfy = NtfyServer::start(NtfyConfig::default());
    let (received, _, _) = tokio::join!(
        ntfy.wait_for_requests(2, WAIT),
        publish(&ntfy, "one"),
        publish(&ntfy, "two"),
    );
    let mut bodies: Vec<String> = received.iter().map(|r| r.text()).collect();
    bodies.sort();
    assert_eq!(bodies, ["one", "two"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_wait_failure_lists_what_arrived() {
    let ntfy = NtfyServer::start(NtfyConfig::default());
    publish(&ntfy, "one").await;
    let url = ntfy.url();
    let waited = tokio::spawn(async move {
        ntfy.wait_for_requests(2, Duration::from_millis(200)).await;
    })
    .await;
    let panic = waited.expect_err("the wait fails").into_panic();
    let message = panic
        .downcast_ref::<String>()
        .expect("a formatted panic message");
    let addr = url.trim_start_matches("http://");
    assert_eq!(
        message,
        &format!("ntfy server at {addr}: 1 of 2 requests received within 200ms: [POST /alerts]")
    );
}

// -------------------------------------------------------------- webhook

/// A webhook POST with the three Standard Webhooks headers.
fn webhook_post(
    receiver: &WebhookReceiver,
    id: &str,
    timestamp: i64,
    signature: &str,
    body: &str,
) -> reqwest::RequestBuilder {
    client()
        .post(receiver.url())
        .header("webhook-id", id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .header("content-type", "application/json")
        .body(body.to_owned())
}

/// Send [`webhook_post`]; the response.
async fn deliver(
    receiver: &WebhookReceiver,
    id: &str,
    timestamp: i64,
    signature: &str,
    body: &str,
) -> reqwest::Response {
    let request = webhook_post(receiver, id, timestamp, signature, body);
    request.send().await.unwrap()
}

#[test]
fn signatures_match_the_specs_reference_library() {
    // The test vector of the Standard Webhooks Rust library (`test_sign`).
    let signature = sign(
        "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
        "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
        1649367553,
        br#"{"email":"test@example.com","username":"test_user"}"#,
    );
    assert_eq!(signature, "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=");
}

#[test]
fn test_secrets_are_fresh_whsec_keys() {
    let (a, b) = (whsec_for_test(), whsec_for_test());
    assert_ne!(a, b);
    let key = a.strip_prefix("whsec_").expect("whsec_ prefix");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(key)
        .unwrap();
    assert_eq!(bytes.len(), 32);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_signed_delivery_is_accepted_and_retries_keep_their_id() {
    let secret = whsec_for_test();
    let receiver = WebhookReceiver::start(&secret);
    let body = r#"{"type":"check.down","check":"www"}"#;
    for _ in 0..2 {
        let now = unix_now();
        let signature = sign(&secret, "msg_1", now, body.as_bytes());
        let response = deliver(&receiver, "msg_1", now, &signature, body).await;
        assert_eq!(response.status(), 200);
    }
    let now = unix_now();
    let other = sign(&secret, "msg_2", now, b"{}");
    deliver(&receiver, "msg_2", now, &other, "{}").await;

    assert_eq!(receiver.deliveries().len(), 3);
    let first = &receiver.deliveries_with_id("msg_1");
    assert_eq!(first.len(), 2);
    assert_eq!(first[0].body, json!({"type": "check.down", "check": "www"}));
    assert_eq!(receiver.distinct_ids(), ["msg_1", "msg_2"]);
    assert!(receiver.refused().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn during_a_key_rotation_one_matching_signature_is_enough() {
    let secret = whsec_for_test();
    let receiver = WebhookReceiver::start(&secret);
    let now = unix_now();
    let old = sign(&whsec_for_test(), "msg_r", now, b"{}");
    let current = sign(&secret, "msg_r", now, b"{}");
    let both = format!("v1a,aGVsbG8= {old} {current}");
    let response = deliver(&receiver, "msg_r", now, &both, "{}").await;
    assert_eq!(response.status(), 200);
    assert_eq!(receiver.distinct_ids(), ["msg_r"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_or_missing_signatures_are_refused_with_401() {
    let secret = whsec_for_test();
    let receiver = WebhookReceiver::start(&secret);
    let now = unix_now();
    let body = r#"{"a":1}"#;
    let good = sign(&secret, "msg_x", now, body.as_bytes());
    let cases: Vec<(reqwest::RequestBuilder, Refusal)> = vec![
        // Signed by another key.
        (
            webhook_post(
                &receiver,
                "msg_x",
                now,
                &sign(&whsec_for_test(), "msg_x", now, body.as_bytes()),
                body,
            ),
            Refusal::BadSignature,
        ),
        // The body changed after signing.
        (
            webhook_post(&receiver, "msg_x", now, &good, r#"{"a":2}"#),
            Refusal::BadSignature,
        ),
        // Another id than the one signed.
        (
            webhook_post(&receiver, "msg_y", now, &good, body),
            Refusal::BadSignature,
        ),
        // Only an asymmetric signature, which this receiver has no key for.
        (
            webhook_post(&receiver, "msg_x", now, &good.replace("v1,", "v1a,"), body),
            Refusal::BadSignature,
        ),
        (
            webhook_post(
                &receiver,
                "msg_x",
                now - 600,
                &sign(&secret, "msg_x", now - 600, body.as_bytes()),
                body,
            ),
            Refusal::TooOld,
        ),
        (
            webhook_post(
                &receiver,
                "msg_x",
                now + 600,
                &sign(&secret, "msg_x", now + 600, body.as_bytes()),
                body,
            ),
            Refusal::TooNew,
        ),
        (
            client()
                .post(receiver.url())
                .header("webhook-id", "msg_x")
                .header("webhook-timestamp", now.to_string())
                .body(body),
            Refusal::MissingHeader("webhook-signature"),
        ),
        (
            client()
                .post(receiver.url())
                .header("webhook-id", "msg_x")
                .header("webhook-timestamp", "soon")
                .header("webhook-signature", good.clone())
                .body(body),
            Refusal::BadTimestamp,
        ),
    ];
    let expected: Vec<Refusal> = cases.iter().map(|(_, why)| why.clone()).collect();
    for (request, why) in cases {
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 401, "{why:?}");
    }
    let refused: Vec<Refusal> = receiver.refused().into_iter().map(|r| r.why).collect();
    assert_eq!(refused, expected);
    assert!(receiver.deliveries().is_empty());

    // Well signed but not JSON: 400.
    let text = sign(&secret, "msg_t", now, b"hello");
    let response = deliver(&receiver, "msg_t", now, &text, "hello").await;
    assert_eq!(response.status(), 400);
    assert_eq!(receiver.refused().last().unwrap().why, Refusal::NotJson);
}

#[tokio::test(flavor = "multi_thread")]
async fn timestamps_are_judged_by_the_receivers_clock_five_minutes_either_way() {
    let secret = whsec_for_test();
    let then = datetime!(2026-06-01 12:00 UTC);
    let receiver = WebhookReceiver::start_with_clock(&secret, Arc::new(FakeClock::new(then)));
    let now = then.unix_timestamp();
    let edges = [(-301, 401), (-300, 200), (300, 200), (301, 401)];
    for (offset, status) in edges {
        let at = now + offset;
        let signature = sign(&secret, "msg_c", at, b"{}");
        let response = deliver(&receiver, "msg_c", at, &signature, "{}").await;
        assert_eq!(
            response.status(),
            status,
            "{offset} s from the receiver's now"
        );
    }
    let accepted: Vec<i64> = receiver.deliveries().iter().map(|d| d.timestamp).collect();
    assert_eq!(accepted, [now - 300, now + 300]);
    let refused: Vec<Refusal> = receiver.refused().into_iter().map(|r| r.why).collect();
    assert_eq!(refused, [Refusal::TooOld, Refusal::TooNew]);
}

// ----------------------------------------------------------------- ntfy

/// Publish `text` to the topic `alerts`, anonymously.
async fn publish(ntfy: &NtfyServer, text: &'static str) -> reqwest::Response {
    let url = ntfy.topic_url("alerts");
    client().post(url).body(text).send().await.unwrap()
}

async fn ntfy_message(response: reqwest::Response) -> NtfyMessage {
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    response.json().await.expect("a message JSON")
}

#[tokio::test(flavor = "multi_thread")]
async fn ntfy_takes_its_fields_from_headers_aliases_and_query() {
    let ntfy = NtfyServer::start(NtfyConfig::default());
    let client = client();
    let full = client
        .post(ntfy.topic_url("alerts"))
        .header("X-Title", "www is down")
        .header("X-Priority", "urgent")
        .header("X-Tags", "warning, skull")
        .header("X-Click", "https://status.example.test/")
        .header("X-Markdown", "yes")
        .body("  **503** from www  \n")
        .send()
        .await
        .unwrap();
    let message = ntfy_message(full).await;
    assert_eq!(message.event, "message");
    assert_eq!(message.topic, "alerts");
    assert_eq!(message.id.len(), 12);
    assert_eq!(message.expires, message.time + 12 * 3600);
    assert_eq!(
        (
            message.title.as_str(),
            message.message.as_str(),
            message.priority
        ),
        ("www is down", "**503** from www", 5)
    );
    assert_eq!(message.tags, ["warning", "skull"]);
    assert_eq!(message.click, "https://status.example.test/");
    assert_eq!(message.content_type, "text/markdown");
    assert_eq!(message.sequence_id, "");

    let short = client
        .put(ntfy.topic_url("alerts"))
        .header("t", "short")
        .header("p", "2")
        .send()
        .await
        .unwrap();
    let short = ntfy_message(short).await;
    assert_eq!(
        (short.title.as_str(), short.priority, short.message.as_str()),
        ("short", 2, "triggered")
    );

    let query = client
        .post(format!(
            "{}?title=from+query&priority=high&tags=a,b",
            ntfy.topic_url("alerts")
        ))
        .body("q")
        .send()
        .await
        .unwrap();
    let query = ntfy_message(query).await;
    assert_eq!(
        (query.title.as_str(), query.priority, query.tags.len()),
        ("from query", 4, 2)
    );

    assert_eq!(ntfy.messages("alerts"), [message, short, query]);
    assert!(ntfy.messages("other").is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn ntfy_publishes_json_to_the_topic_it_names() {
    let ntfy = NtfyServer::start(NtfyConfig::default());
    let body = json!({
        "topic": "alerts", "message": "www is back", "title": "resolved",
        "priority": 3, "tags": ["white_check_mark"], "click": "https://s.test/", "markdown": true
    });
    let response = client().post(ntfy.url()).json(&body).send().await.unwrap();
    let message = ntfy_message(response).await;
    assert_eq!(message.topic, "alerts");
    assert_eq!(
        (
            message.title.as_str(),
            message.message.as_str(),
            message.priority
        ),
        ("resolved", "www is back", 3)
    );
    assert_eq!(message.tags, ["white_check_mark"]);
    assert_eq!(
        (message.click.as_str(), message.content_type.as_str()),
        ("https://s.test/", "text/markdown")
    );
    assert_eq!(ntfy.notifications("alerts"), [message]);
}

#[tokio::test(flavor = "multi_thread")]
async fn ntfy_refuses_what_ntfy_refuses_with_its_own_errors() {
    let ntfy = NtfyServer::start(NtfyConfig::default());
    let client = client();
    let cases = [
        (
            client
                .post(ntfy.topic_url("alerts"))
                .header("Priority", "loud")
                .body("x"),
            400,
            r#"{"code":40007,"http":400,"error":"invalid priority parameter","link":"https://ntfy.sh/docs/publish/#message-priority"}"#,
        ),
        (
            client.post(ntfy.url()).body("not json"),
            400,
            r#"{"code":40017,"http":400,"error":"invalid request: request body must be message JSON","link":"https://ntfy.sh/docs/publish/#publish-as-json"}"#,
        ),
        (
            client
                .post(ntfy.url())
                .json(&json!({"topic": "no spaces", "message": "x"})),
            400,
            r#"{"code":40009,"http":400,"error":"invalid request: topic invalid"}"#,
        ),
        (
            client.post(ntfy.topic_url("alerts")).body(vec![0xff, 0xfe]),
            400,
            r#"{"code":40011,"http":400,"error":"invalid request: message must be UTF-8 encoded"}"#,
        ),
        (
            client.get(ntfy.topic_url("alerts/sid/elsewhere")),
            404,
            r#"{"code":40401,"http":404,"error":"page not found"}"#,
        ),
    ];
    for (request, status, body) in cases {
        let response = request.send().await.unwrap();
        assert_eq!(response.headers()["access-control-allow-origin"], "*");
        assert_eq!(answer(response).await, (status, format!("{body}\n")));
    }
    assert!(ntfy.messages("alerts").is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn ntfy_with_users_takes_tokens_and_passwords_and_nothing_else() {
    let ntfy = NtfyServer::start(NtfyConfig {
        users: vec![("vigie".into(), "s3cret".into())],
        tokens: vec!["tk_good".into()],
        ..NtfyConfig::default()
    });
    let client = client();
    let url = ntfy.topic_url("alerts");
    let unauthorized = r#"{"code":40101,"http":401,"error":"unauthorized","link":"https://ntfy.sh/docs/publish/#authentication"}"#;
    let forbidden = r#"{"code":40301,"http":403,"error":"forbidden","link":"https://ntfy.sh/docs/publish/#authentication"}"#;
    let post = |text: &'static str| client.post(&url).body(text);
    let cases = [
        (post("t").bearer_auth("tk_good"), 200, None),
        (post("b").basic_auth("vigie", Some("s3cret")), 200, None),
        (post("x").bearer_auth("tk_bad"), 401, Some(unauthorized)),
        (
            post("x").basic_auth("vigie", Some("guess")),
            401,
            Some(unauthorized),
        ),
        (post("x"), 403, Some(forbidden)),
    ];
    for (request, status, error) in cases {
        let (got, body) = answer(request.send().await.unwrap()).await;
        assert_eq!(got, status, "{body}");
        if let Some(error) = error {
            assert_eq!(body, format!("{error}\n"));
        }
    }

    let texts: Vec<String> = ntfy
        .messages("alerts")
        .into_iter()
        .map(|m| m.message)
        .collect();
    assert_eq!(texts, ["t", "b"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn ntfy_without_users_ignores_credentials() {
    let ntfy = NtfyServer::start(NtfyConfig::default());
    let url = ntfy.topic_url("alerts");
    let response = client()
        .post(url)
        .bearer_auth("tk_any")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn ntfy_updates_a_notification_in_place_by_sequence_id() {
    let ntfy = NtfyServer::start(NtfyConfig::default());
    let client = client();
    // By path, by header, and by JSON: three ways to name one sequence.
    let first = client
        .post(ntfy.topic_url("alerts/www-down"))
        .body("www down (1 of 3 vantages)")
        .send()
        .await
        .unwrap();
    assert_eq!(ntfy_message(first).await.sequence_id, "www-down");
    let other = ntfy_message(publish(&ntfy, "api slow").await).await;
    client
        .post(ntfy.topic_url("alerts"))
        .header("X-Sequence-ID", "www-down")
        .body("www down (3 of 3 vantages)")
        .send()
        .await
        .unwrap();
    let json = json!({"topic": "alerts", "sequence_id": "www-down", "message": "www down (2 of 3 vantages)", "priority": 4});
    let latest = ntfy_message(client.post(ntfy.url()).json(&json).send().await.unwrap()).await;
    assert_eq!(latest.sequence_id, "www-down");

    let shown = ntfy.notifications("alerts");
    let texts: Vec<&str> = shown.iter().map(|m| m.message.as_str()).collect();
    assert_eq!(texts, ["www down (2 of 3 vantages)", "api slow"]);
    assert_eq!(shown[0], latest);

    // A message without a sequence id is updated through its own id.
    client
        .post(ntfy.topic_url(&format!("alerts/{}", other.id)))
        .body("api fine")
        .send()
        .await
        .unwrap();
    let texts: Vec<String> = ntfy
        .notifications("alerts")
        .into_iter()
        .map(|m| m.message)
        .collect();
    assert_eq!(texts, ["www down (2 of 3 vantages)", "api fine"]);

    let cleared = ntfy_message(
        client
            .put(ntfy.topic_url("alerts/www-down/clear"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (cleared.event.as_str(), cleared.sequence_id.as_str()),
        ("message_clear", "www-down")
    );
    let deleted = ntfy_message(
        client
            .delete(ntfy.topic_url(&format!("alerts/{}", other.id)))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(deleted.event, "message_delete");
    assert!(ntfy.notifications("alerts").is_empty());
    let events: Vec<String> = ntfy
        .messages("alerts")
        .into_iter()
        .map(|m| m.event)
        .collect();
    assert_eq!(
        events,
        [
            "message",
            "message",
            "message",
            "message",
            "message",
            "message_clear",
            "message_delete"
        ]
    );
}

/// `ntfy` accepts `accepted` messages, then refuses the next one with the
/// 429 error `body` and keeps only the accepted.
async fn accepts_then_refuses(ntfy: &NtfyServer, accepted: usize, body: &str) {
    for _ in 0..accepted {
        assert_eq!(publish(ntfy, "x").await.status(), 200);
    }
    let refused = publish(ntfy, "x").await;
    assert_eq!(answer(refused).await, (429, format!("{body}\n")));
    assert_eq!(ntfy.messages("alerts").len(), accepted);
}

#[tokio::test(flavor = "multi_thread")]
async fn ntfy_limits_requests_per_visitor_with_its_42901() {
    let ntfy = NtfyServer::start(NtfyConfig {
        request_limit: Some(RateLimit {
            burst: 2,
            every: Duration::from_secs(3600),
        }),
        ..NtfyConfig::default()
    });
    let error = r#"{"code":42901,"http":429,"error":"limit reached: too many requests","link":"https://ntfy.sh/docs/publish/#limitations"}"#;
    accepts_then_refuses(&ntfy, 2, error).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn ntfy_refuses_messages_past_the_daily_quota_with_its_42908() {
    let ntfy = NtfyServer::start(NtfyConfig {
        daily_messages: Some(1),
        ..NtfyConfig::default()
    });
    let error = r#"{"code":42908,"http":429,"error":"limit reached: daily message quota reached","link":"https://ntfy.sh/docs/publish/#limitations"}"#;
    accepts_then_refuses(&ntfy, 1, error).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scripted_ntfy_429_carries_ntfys_error_and_the_planned_retry_after() {
    let ntfy = NtfyServer::start(NtfyConfig::default());
    ntfy.plan(Plan::status(429).header("retry-after", "30"));
    let response = publish(&ntfy, "x").await;
    assert_eq!(response.headers()["retry-after"], "30");
    let (status, body) = answer(response).await;
    assert_eq!(status, 429);
    let error: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (error["code"].as_u64(), error["error"].as_str()),
        (Some(42901), Some("limit reached: too many requests"))
    );
    assert!(ntfy.messages("alerts").is_empty());
}

// ------------------------------------------------------------ PagerDuty

const ROUTING_KEY: &str = "0123456789abcdef0123456789abcdef";

fn trigger(dedup_key: &str) -> Value {
    json!({
        "routing_key": ROUTING_KEY, "event_action": "trigger", "dedup_key": dedup_key,
        "payload": {"summary": "www is down", "source": "vigie", "severity": "critical",
                    "timestamp": "2026-12-02T18:00:00Z", "custom_details": {"status": 503}},
        "links": [{"href": "https://status.example.test/", "text": "status"}],
        "client": "vigie", "client_url": "https://status.example.test/"
    })
}

async fn enqueue(pagerduty: &PagerDutyEvents, event: &Value) -> (u16, Value) {
    let response = client()
        .post(pagerduty.url())
        .json(event)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.expect("a JSON answer"))
}

#[tokio::test(flavor = "multi_thread")]
async fn pagerduty_keeps_one_incident_triggered_then_resolved() {
    let pagerduty = PagerDutyEvents::start();
    let success = json!({"status": "success", "message": "Event processed", "dedup_key": "www"});
    assert_eq!(
        enqueue(&pagerduty, &trigger("www")).await,
        (202, success.clone())
    );
    // A second trigger while open is deduplicated into the same incident.
    assert_eq!(
        enqueue(&pagerduty, &trigger("www")).await,
        (202, success.clone())
    );
    let ack =
        json!({"routing_key": ROUTING_KEY, "event_action": "acknowledge", "dedup_key": "www"});
    assert_eq!(enqueue(&pagerduty, &ack).await.0, 202);
    assert_eq!(pagerduty.incidents()[0].state, IncidentState::Acknowledged);
    let resolve =
        json!({"routing_key": ROUTING_KEY, "event_action": "resolve", "dedup_key": "www"});
    assert_eq!(enqueue(&pagerduty, &resolve).await, (202, success));

    let incidents = pagerduty.incidents();
    assert_eq!(incidents.len(), 1);
    let incident = &incidents[0];
    assert_eq!(
        (
            incident.state,
            incident.summary.as_str(),
            incident.severity.as_str()
        ),
        (IncidentState::Resolved, "www is down", "critical")
    );
    use EventAction::{Acknowledge, Resolve, Trigger};
    assert_eq!(incident.actions, [Trigger, Trigger, Acknowledge, Resolve]);

    // Resolving again changes nothing; a new trigger opens a new incident.
    assert_eq!(enqueue(&pagerduty, &resolve).await.0, 202);
    assert_eq!(enqueue(&pagerduty, &trigger("www")).await.0, 202);
    let states: Vec<IncidentState> = pagerduty
        .incidents_with_key("www")
        .into_iter()
        .map(|i| i.state)
        .collect();
    assert_eq!(states, [IncidentState::Resolved, IncidentState::Triggered]);
    assert_eq!(pagerduty.events().len(), 6);
}

#[tokio::test(flavor = "multi_thread")]
async fn pagerduty_gives_a_trigger_without_a_key_a_fresh_one() {
    let pagerduty = PagerDutyEvents::start();
    let mut event = trigger("");
    event.as_object_mut().unwrap().remove("dedup_key");
    let (status, body) = enqueue(&pagerduty, &event).await;
    assert_eq!(status, 202);
    let key = body["dedup_key"].as_str().unwrap();
    assert_eq!(key.len(), 32);
    assert_eq!(pagerduty.incidents()[0].dedup_key, key);
}

#[tokio::test(flavor = "multi_thread")]
async fn pagerduty_names_every_problem_of_an_invalid_event() {
    let pagerduty = PagerDutyEvents::start();
    let bad = json!({
        "routing_key": "short", "event_action": "trigger",
        "payload": {"summary": "x".repeat(1025), "severity": "fatal", "timestamp": "yesterday"},
        "images": [{"alt": "no src"}]
    });
    let (status, body) = enqueue(&pagerduty, &bad).await;
    assert_eq!(status, 400);
    assert_eq!(
        body,
        json!({"status": "invalid event", "message": "Event object is invalid", "errors": [
            "Length of 'routing_key' is incorrect (should be 32 characters)",
            "Length of 'payload.summary' is incorrect (should be at most 1024 characters)",
            "'payload.source' is missing or blank",
            "'payload.severity' is invalid (must be one of the following: 'critical', 'warning', 'error' or 'info')",
            "'payload.timestamp' is invalid (should be an ISO 8601 date)",
            "'images[0].src' is missing or blank"
        ]})
    );
    let resolve_without_key = json!({"routing_key": ROUTING_KEY, "event_action": "resolve"});
    let (status, body) = enqueue(&pagerduty, &resolve_without_key).await;
    assert_eq!(
        (status, body["errors"].clone()),
        (400, json!(["'dedup_key' is missing or blank"]))
    );
    let unknown_action =
        json!({"routing_key": ROUTING_KEY, "event_action": "page", "dedup_key": "k"});
    assert_eq!(enqueue(&pagerduty, &unknown_action).await.0, 400);
    let trigger_without_payload = json!({"routing_key": ROUTING_KEY, "event_action": "trigger"});
    let (_, body) = enqueue(&pagerduty, &trigger_without_payload).await;
    assert_eq!(
        body["errors"],
        json!(["'payload' is missing or not an object"])
    );
    // The longest summary allowed passes.
    let mut longest = trigger("long");
    longest["payload"]["summary"] = json!("x".repeat(1024));
    assert_eq!(enqueue(&pagerduty, &longest).await.0, 202);
    assert_eq!(pagerduty.incidents().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scripted_pagerduty_429_changes_no_incident() {
    let pagerduty = PagerDutyEvents::start();
    pagerduty.plan(Plan::status(429));
    let (status, body) = enqueue(&pagerduty, &trigger("www")).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (429, Some("throttle event"))
    );
    assert!(pagerduty.incidents().is_empty());
    assert_eq!(enqueue(&pagerduty, &trigger("www")).await.0, 202);
    assert_eq!(pagerduty.incidents().len(), 1);
}

// ---------------------------------------------------------------- Slack

#[tokio::test(flavor = "multi_thread")]
async fn slack_takes_text_blocks_and_threads() {
    let slack = SlackWebhook::start();
    assert!(slack.url().contains("/services/T"), "{}", slack.url());
    let client = client();
    let blocks = json!([{"type": "section", "text": {"type": "mrkdwn", "text": "*www* is down"}}]);
    let sent = [
        json!({"text": "www is down"}),
        json!({"blocks": blocks}),
        json!({"text": "back up", "thread_ts": "1733162400.000100"}),
    ];
    for message in &sent {
        let response = client.post(slack.url()).json(message).send().await.unwrap();
        assert_eq!(answer(response).await, (200, "ok".into()));
    }
    let form = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", r#"{"text":"from a form"}"#)
        .finish();
    let form = client
        .post(slack.url())
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 200);

    let messages = slack.messages();
    let texts: Vec<Option<&str>> = messages.iter().map(|m| m.text.as_deref()).collect();
    assert_eq!(
        texts,
        [
            Some("www is down"),
            None,
            Some("back up"),
            Some("from a form")
        ]
    );
    assert_eq!(messages[1].blocks, Some(blocks));
    assert_eq!(messages[2].thread_ts.as_deref(), Some("1733162400.000100"));
    assert_eq!(messages[0].payload, sent[0]);
}

#[tokio::test(flavor = "multi_thread")]
async fn slack_answers_its_documented_errors() {
    let slack = SlackWebhook::start();
    let client = client();
    let other_service = slack
        .url()
        .replace("/services/T0VIGIE00", "/services/T0OTHER00");
    let url = slack.url();
    let post = |url: &str, body: Value| client.post(url).json(&body);
    let cases = [
        (client.post(&url).body("not json"), 400, "invalid_payload"),
        (post(&url, json!(["a list"])), 400, "invalid_payload"),
        (
            post(&url, json!({"blocks": "no list"})),
            400,
            "invalid_payload",
        ),
        (
            post(&url, json!({"text": "", "blocks": []})),
            400,
            "no_text",
        ),
        (
            post(&slack.url_with_wrong_secret(), json!({"text": "x"})),
            403,
            "invalid_token",
        ),
        (
            post(&other_service, json!({"text": "x"})),
            404,
            "no_service",
        ),
        (client.get(&url), 404, "no_service"),
    ];
    for (request, status, word) in cases {
        assert_eq!(
            answer(request.send().await.unwrap()).await,
            (status, word.to_owned())
        );
    }
    slack.plan(Plan::status(410));
    assert_eq!(say(&slack, "x").await, (410, "channel_is_archived".into()));
    assert!(slack.messages().is_empty());
}
