//! Incident updates through the real daemon: `vigie incident note` (over
//! the local socket) on the open incident of a check that a loopback HTTPS
//! target fails, read back through `GET /api/v1/incidents/{key}/updates`;
//! the POST endpoint with and without the token, and what it refuses.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::daemon::{api_section, free_addr, vigie_cli_async, Daemon};
use crate::common::env::{check_toml, Env};
use crate::common::servers::switchable_target;
use crate::common::smtp::{SmtpOpts, SmtpServer};

const START: Duration = Duration::from_secs(20);
const MAIL: Duration = Duration::from_secs(30);
const STOP: Duration = Duration::from_secs(30);
const TOKEN: &str = "s3cr3t-token";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_update_noted_from_the_cli_is_kept_with_the_open_incident_and_bad_ones_are_refused() {
    let smtp = SmtpServer::start(SmtpOpts::plain());
    let (target, status) = switchable_target();
    status.store(503, Ordering::SeqCst);
    let api = free_addr();
    let env = Env::with_config("");
    let token = env.path().join("api-token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    env.append_config(&api_section(api, Some(&token)));
    env.append_config(&smtp.alerting_sections("failure_threshold = 2\ngroup_window = \"1s\"\n"));
    env.write_checks(
        "checks.toml",
        &check_toml(
            "site",
            &target.url("/site"),
            "every = \"1s\"\ntimeout = \"5s\"\n[check.expect]\nstatus = [200]",
        ),
    );
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.token = Some(TOKEN.to_string());
    daemon.wait_healthy(START).await;
    let mails = smtp.wait_for(1, MAIL);
    assert!(mails[0].header("Subject").unwrap().contains("DOWN site"));

    // The CLI goes through the local socket and picks the open incident.
    let out = vigie_cli_async(
        &env.config_path(),
        &[
            "incident",
            "note",
            "site",
            "--state",
            "identified",
            "The **DNS** zone lost its records",
        ],
    )
    .await;
    let said = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        said.starts_with("added an update (identified) to the incident site@")
            && said.contains("site's open incident, failing since"),
        "{said}"
    );

    let listed = daemon.get_json("/api/v1/incidents").await.unwrap();
    let incident = &listed["incidents"][0];
    assert_eq!(incident["check"], "site", "{listed}");
    assert_eq!(incident["open"], true, "{listed}");
    let key = incident["key"].as_str().unwrap().to_string();
    assert!(key.starts_with("site@"), "{key}");
    let path = format!("/api/v1/incidents/{key}/updates");
    let read = daemon.get_json(&path).await.unwrap();
    assert_eq!(read["key"], key.as_str());
    assert_eq!(read["updates"][0]["state"], "identified", "{read}");
    assert_eq!(
        read["updates"][0]["text"], "The **DNS** zone lost its records",
        "{read}"
    );

    // With the token over TCP: 201 and the update as kept, default state.
    let (code, body) = daemon
        .post(&path, &serde_json::json!({ "text": "Records restored" }))
        .await
        .unwrap();
    assert_eq!(code, 201, "{body}");
    let kept: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(kept["state"], "investigating");
    assert_eq!(kept["incident"], key.as_str());
    let listed = vigie_cli_async(&env.config_path(), &["incident", "list", "site"]).await;
    let list = text(&listed.stdout);
    assert!(
        list.starts_with(&format!("{key}  (open, failing since "))
            && list.contains("identified: The **DNS** zone lost its records")
            && list.contains("investigating: Records restored"),
        "{list}"
    );

    // What is refused, and the words that say why.
    let refused = [
        (
            serde_json::json!({ "text": "  " }),
            400,
            "text: an incident update needs text",
        ),
        (
            serde_json::json!({ "text": "x".repeat(8 * 1024 + 1) }),
            400,
            "more than the 8192 allowed",
        ),
        (
            serde_json::json!({ "state": "fixed", "text": "done" }),
            400,
            "state: unknown incident state",
        ),
        (
            serde_json::json!({ "text": "x".repeat(64 * 1024) }),
            413,
            "takes a body of at most",
        ),
    ];
    for (body, want, words) in refused {
        let (code, answer) = daemon.post(&path, &body).await.unwrap();
        assert_eq!(code, want, "{answer}");
        assert!(answer.contains(words), "{answer}");
    }
    let (code, answer) = daemon
        .post(
            "/api/v1/incidents/site@2001-01-01T00:00:00.000Z/updates",
            &serde_json::json!({ "text": "?" }),
        )
        .await
        .unwrap();
    assert_eq!(code, 404, "{answer}");
    assert!(answer.contains("`vigie incident list`"), "{answer}");

    // Without the token over TCP: refused before the body is read.
    daemon.token = None;
    let (code, answer) = daemon
        .post(&path, &serde_json::json!({ "text": "anonymous" }))
        .await
        .unwrap();
    assert_eq!(code, 401, "{answer}");
    daemon.token = Some(TOKEN.to_string());
    let read = daemon.get_json(&path).await.unwrap();
    assert_eq!(read["updates"].as_array().map(Vec::len), Some(2), "{read}");
    daemon.stop(STOP).await;
}

/// Without a token, TCP may not add an update even on loopback; the CLI
/// on the same machine goes through the local socket, and a check with no
/// incident is named as such.
#[tokio::test(flavor = "multi_thread")]
async fn without_a_token_only_the_local_socket_may_add_and_a_check_without_incident_is_told() {
    let (target, _status) = switchable_target();
    let api = free_addr();
    let env = Env::with_config(&api_section(api, None));
    env.write_checks(
        "checks.toml",
        &check_toml("site", &target.url("/site"), "every = \"1s\""),
    );
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(START).await;

    let (code, answer) = daemon
        .post(
            "/api/v1/incidents/site@2001-01-01T00:00:00.000Z/updates",
            &serde_json::json!({ "text": "from TCP" }),
        )
        .await
        .unwrap();
    assert_eq!(code, 403, "{answer}");
    assert!(
        answer.contains("incident updates over TCP need the token"),
        "{answer}"
    );

    let out = vigie_cli_async(&env.config_path(), &["incident", "note", "site", "up?"]).await;
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        text(&out.stderr).trim(),
        "vigie: site has no open incident and none in the last week: an update is about an incident; \
         name an older one with --incident KEY (`vigie incident list` shows the keys)"
    );
    let out = vigie_cli_async(
        &env.config_path(),
        &["incident", "note", "site", "--incident", "api@x", "up?"],
    )
    .await;
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr).contains("the incident api@x is about the check api, not site"),
        "{}",
        text(&out.stderr)
    );
    // Over the socket, the key is looked up (no token needed).
    let out = vigie_cli_async(
        &env.config_path(),
        &["incident", "note", "site", "--incident", "site@x", "up?"],
    )
    .await;
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr)
            .contains("404 Not Found: no open or recent incident has the key \"site@x\""),
        "{}",
        text(&out.stderr)
    );
    daemon.stop(STOP).await;
}
