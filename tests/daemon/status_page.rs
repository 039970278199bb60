//! The public status page against the real daemon: `/status`, its feed and
//! a badge read without a token while the operator pages keep asking for
//! one; what it must never show (the target URL, the failure message, a
//! label outside `public_labels`, a check outside `[status_page] checks`)
//! is looked for in the raw HTML, the feed and the browser's DOM.
//! Screenshots (light, dark, 390 px wide) go to `target/screenshots/`.

use std::time::Duration;

use fantoccini::Locator;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::browser::Browser;
use crate::common::daemon::{free_addr, metric, poll, vigie_cli_async, Daemon};
use crate::common::env::{check_toml, Env};
use crate::common::*;

const TOKEN: &str = "status-token-0123456789abcdef0123456789";
const EVERY: &str = "every = \"1s\"\ntimeout = \"5s\"";
const SECRET_PATH: &str = "/private-admin-7f3a";
const HIDDEN_LABEL: &str = "team-hidden-42";

/// GET `path` without a token: code, headers, body.
async fn anonymous(
    daemon: &Daemon,
    path: &str,
    etag: Option<&str>,
) -> (u16, reqwest::header::HeaderMap, String) {
    daemon.get_public(path, etag).await.expect("an answer")
}

/// The text nodes of an SVG document, which must be well-formed.
fn svg_texts(svg: &str) -> Vec<String> {
    let mut reader = quick_xml::Reader::from_str(svg);
    let mut texts = Vec::new();
    let mut root = None;
    loop {
        match reader.read_event().expect("well-formed SVG") {
            quick_xml::events::Event::Start(e) if root.is_none() => {
                root = Some(String::from_utf8_lossy(e.name().as_ref()).into_owned());
            }
            quick_xml::events::Event::Text(t) => texts.push(t.decode().unwrap().into_owned()),
            quick_xml::events::Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(root.as_deref(), Some("svg"), "{svg}");
    texts
}

#[tokio::test(flavor = "multi_thread")]
async fn the_public_status_page_feed_and_badge_show_only_what_is_public() {
    let site = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let refused = refused_addr();
    let api = free_addr();
    let env = Env::new();
    env.api_with_token(api, TOKEN);
    env.append_config(
        "request_timeout = \"2s\"\n\
         [status_page]\npublic = true\ntitle = \"Example status\"\n\
         checks = [\"site\", \"broken\", \"docs\"]\npublic_labels = [\"env\"]\n\
         [[announcement]]\ntitle = \"Datacentre move on Sunday\"\n\
         text = \"Expect a **short** pause. <script>alert(1)</script>\"\n\
         from = \"2026-01-01T00:00:00Z\"\nuntil = \"2099-01-01T00:00:00Z\"\n",
    );
    let broken_url = format!("https://{HOST}:{}{SECRET_PATH}", refused.port());
    env.write_checks(
        "checks.toml",
        &[
            check_toml(
                "site",
                &site.url("/"),
                &format!("{EVERY}\nlabels = {{ env = \"prod\", owner = \"{HIDDEN_LABEL}\" }}"),
            ),
            check_toml(
                "broken",
                &broken_url,
                &format!("{EVERY}\nlabels = {{ env = \"prod\" }}"),
            ),
            check_toml("docs", &site.url("/"), EVERY),
            check_toml(
                "internal-billing",
                &site.url("/"),
                &format!("{EVERY}\nlabels = {{ env = \"prod\" }}"),
            ),
        ]
        .concat(),
    );
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.token = Some(TOKEN.to_string());
    daemon.wait_healthy(Duration::from_secs(30)).await;
    let failure = poll(Duration::from_secs(20), "broken failing", async || {
        let checks = daemon.get_json("/api/v1/checks").await?;
        checks["checks"]
            .as_array()
            .and_then(|all| all.iter().find(|c| c["name"] == "broken"))
            .and_then(|c| c["latest"]["failures"][0]["message"].as_str())
            .map(str::to_string)
            .ok_or_else(|| checks.to_string())
    })
    .await;

    // No token, and yet the page: each check with its word, once the
    // snapshot (at most 10 s old) has the newest results.
    let (code, headers, html) = poll(
        Duration::from_secs(30),
        "/status with every word",
        async || {
            let answer = anonymous(&daemon, "/status", None).await;
            let ready = answer.0 == 200
                && answer.2.matches("Operational").count() == 2
                && answer.2.contains(">Down<");
            let words: Vec<&str> = ["Operational", "Degraded", "Down", "No data"]
                .into_iter()
                .filter(|w| answer.2.contains(w))
                .collect();
            let last = format!("{} with {words:?}", answer.0);
            ready.then_some(answer).ok_or(last)
        },
    )
    .await;
    assert_eq!(code, 200);
    let (_, login_headers, _) = anonymous(&daemon, "/login", None).await;
    assert_eq!(
        headers["content-security-policy"], login_headers["content-security-policy"],
        "the operator pages' CSP"
    );
    assert_eq!(headers["cache-control"], "no-cache");
    let etag = headers["etag"].to_str().unwrap().to_string();
    for shown in [
        "Example status",
        "Datacentre move on Sunday",
        "<strong>short</strong>",
        "env=prod",
        ">site<",
        ">broken<",
        ">docs<",
    ] {
        assert!(
            html.contains(shown),
            "{shown} missing from /status:\n{html}"
        );
    }
    let secrets = [
        SECRET_PATH,
        &refused.port().to_string(),
        HOST,
        failure.as_str(),
        HIDDEN_LABEL,
        "owner",
        "internal-billing",
        "<script>",
    ];
    for secret in secrets {
        assert!(
            !html.contains(secret),
            "{secret} leaked into /status:\n{html}"
        );
    }
    // The operator's endpoints still want the token.
    let (code, _, _) = anonymous(&daemon, "/api/v1/checks", None).await;
    assert_eq!(code, 401);

    // The page a client holds is a 304 on its ETag (a new snapshot may
    // have come since: its tag is taken and asked again).
    let mut held = etag;
    poll(Duration::from_secs(30), "a 304 on the ETag", async || {
        let (code, again, body) = anonymous(&daemon, "/status", Some(&held)).await;
        if code == 304 && body.is_empty() && again["etag"].to_str().ok() == Some(held.as_str()) {
            return Ok(());
        }
        held = again["etag"].to_str().unwrap().to_string();
        Err(format!("{code}"))
    })
    .await;

    // The feed is Atom, with the broken check's open incident once the
    // failure threshold is crossed and a snapshot has it.
    let xml = poll(
        Duration::from_secs(30),
        "the feed with broken's incident",
        async || {
            let (code, headers, xml) = anonymous(&daemon, "/status/feed.atom", None).await;
            assert_eq!(code, 200);
            assert_eq!(
                headers["content-type"],
                "application/atom+xml; charset=utf-8"
            );
            let feed =
                atom_syndication::Feed::read_from(xml.as_bytes()).expect("the feed parses as Atom");
            assert_eq!(feed.title().as_str(), "Example status: incidents");
            let listed = feed.entries().iter().any(|e| {
                e.title().as_str().starts_with("broken: incident since")
                    && e.title().as_str().ends_with("(ongoing)")
            });
            listed.then_some(xml.clone()).ok_or(xml)
        },
    )
    .await;
    for secret in secrets {
        assert!(
            !xml.contains(secret),
            "{secret} leaked into the feed:\n{xml}"
        );
    }

    // An update written with `vigie incident note` reaches the page and
    // the feed, once a snapshot (at most 10 s old) has it.
    poll(
        Duration::from_secs(30),
        "the CLI's update kept",
        async || {
            let out = vigie_cli_async(
                &env.config_path(),
                &[
                    "incident",
                    "note",
                    "broken",
                    "--state",
                    "identified",
                    "Our **upstream** provider is down",
                ],
            )
            .await;
            let said = String::from_utf8_lossy(&out.stderr).into_owned();
            (out.status.code() == Some(0)).then_some(()).ok_or(said)
        },
    )
    .await;
    poll(
        Duration::from_secs(30),
        "the update on /status and in the feed",
        async || {
            let (_, _, html) = anonymous(&daemon, "/status", None).await;
            let (_, _, xml) = anonymous(&daemon, "/status/feed.atom", None).await;
            let feed =
                atom_syndication::Feed::read_from(xml.as_bytes()).map_err(|e| e.to_string())?;
            let on_page =
                html.contains("<strong>upstream</strong> provider") && html.contains("identified");
            let in_feed = feed.entries().iter().any(|e| {
                e.title().as_str().starts_with("broken: ")
                    && e.content()
                        .and_then(|c| c.value())
                        .is_some_and(|v| v.contains("upstream"))
            });
            (on_page && in_feed)
                .then_some(())
                .ok_or(format!("on the page: {on_page}, in the feed: {in_feed}"))
        },
    )
    .await;

    // A badge is SVG naming the check and its word; a hidden check has none.
    let (code, headers, svg) = anonymous(&daemon, "/status/badge/broken.svg", None).await;
    assert_eq!(code, 200);
    assert_eq!(headers["content-type"], "image/svg+xml");
    assert_eq!(svg_texts(&svg), ["broken: Down", "broken", "Down"]);
    let (_, _, svg) = anonymous(&daemon, "/status/badge/site.svg?show=uptime", None).await;
    assert_eq!(
        svg_texts(&svg),
        ["site: 100.00% 30d", "site", "100.00% 30d"]
    );
    let (code, _, _) = anonymous(&daemon, "/status/badge/internal-billing.svg", None).await;
    assert_eq!(code, 404);

    // The renders are counted, and far fewer than the requests.
    let (_, metrics) = daemon.get("/metrics").await.unwrap();
    let renders = metric(&metrics, "vigie_status_page_renders_total").expect("the metric");
    assert!(renders >= 1.0, "{renders}");

    // The listener's request deadline holds here too: a head that never
    // ends is cut off (request_timeout = 2s), it does not hold a slot.
    let mut slow = tokio::net::TcpStream::connect(api).await.unwrap();
    slow.write_all(format!("GET /status HTTP/1.1\r\nHost: {api}\r\n").as_bytes())
        .await
        .unwrap();
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), slow.read_to_end(&mut rest))
        .await
        .expect("the daemon closes a request that outlives request_timeout")
        .ok();

    // In a real browser, without logging in.
    let origin = format!("http://{api}");
    let browser = Browser::start().await;
    let client = &browser.client;
    client.goto(&format!("{origin}/")).await.unwrap();
    assert_eq!(
        client.current_url().await.unwrap().path(),
        "/login",
        "the overview needs the token"
    );
    client.goto(&format!("{origin}/status")).await.unwrap();
    assert_eq!(client.current_url().await.unwrap().path(), "/status");
    let groups: Vec<String> = {
        let mut out = Vec::new();
        for h in client
            .find_all(Locator::Css("section.group h2"))
            .await
            .unwrap()
        {
            out.push(h.text().await.unwrap().to_lowercase());
        }
        out
    };
    assert_eq!(groups, ["prod", "other"]);
    let mut cards = Vec::new();
    for card in client.find_all(Locator::Css("li.check")).await.unwrap() {
        cards.push(card.text().await.unwrap());
    }
    assert_eq!(cards.len(), 3, "{cards:?}");
    assert!(
        cards
            .iter()
            .any(|c| c.contains("broken") && c.contains("Down")),
        "{cards:?}"
    );
    assert!(
        cards
            .iter()
            .any(|c| c.contains("site") && c.contains("Operational")),
        "{cards:?}"
    );
    // The update written with the CLI, as a reader's browser shows it.
    let mut said = Vec::new();
    for update in client
        .find_all(Locator::Css("article.incident div.update"))
        .await
        .unwrap()
    {
        said.push(update.text().await.unwrap());
    }
    assert!(
        said.iter()
            .any(|u| u.starts_with("identified") && u.contains("Our upstream provider is down")),
        "{said:?}"
    );
    let dom: String = serde_json::from_value(
        client
            .execute("return document.documentElement.outerHTML;", vec![])
            .await
            .unwrap(),
    )
    .unwrap();
    for secret in secrets {
        assert!(!dom.contains(secret), "{secret} in the DOM:\n{dom}");
    }
    for bar in client.find_all(Locator::Css("div.bar")).await.unwrap() {
        assert_eq!(bar.find_all(Locator::Css("i")).await.unwrap().len(), 90);
    }
    let scripts = client.find_all(Locator::Css("script")).await.unwrap();
    assert!(scripts.is_empty(), "the page reads without a script");
    browser.dark(&format!("{origin}/status")).await;
    browser
        .save_views(&format!("{origin}/status"), "status")
        .await;

    // Nothing came from another origin; the CSP blocked nothing.
    browser.assert_only_from(&origin).await;
    browser.close().await;
    daemon.stop(Duration::from_secs(10)).await;
}
