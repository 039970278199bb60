//! The status pages in a real browser: Debian's headless Chromium, through
//! chromedriver, against the real daemon and real loopback targets. One
//! target's certificate is swapped while the test runs, so its timeline
//! shows a renewal. Screenshots of every page are saved under
//! `target/screenshots/` for a person to look at.

use std::time::Duration;

use crate::common::browser::Browser;
use crate::common::daemon::{api_section, free_addr, poll, Daemon};
use crate::common::env::{check_toml, Env};
use crate::common::gate::Gate;
use crate::common::*;
use fantoccini::Locator;
use serde_json::{json, Value};

const TOKEN: &str = "page-token-0123456789abcdef0123456789";
const EVERY: &str = "every = \"1s\"\ntimeout = \"5s\"";

async fn texts(browser: &Browser, css: &str) -> Vec<String> {
    let mut out = Vec::new();
    for element in browser.client.find_all(Locator::Css(css)).await.unwrap() {
        out.push(element.text().await.unwrap());
    }
    out
}

async fn count(browser: &Browser, css: &str) -> usize {
    browser
        .client
        .find_all(Locator::Css(css))
        .await
        .unwrap()
        .len()
}

/// The leaf the daemon last saw for `name`.
async fn served_leaf(daemon: &Daemon, name: &str) -> Result<String, String> {
    let history = daemon.history(name).await?;
    history
        .last()
        .and_then(|o| o["tls"]["chain"][0]["sha256"].as_str())
        .map(str::to_string)
        .ok_or_else(|| format!("no leaf yet for {name}"))
}

fn sha256(der: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(der)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Fills the login form the browser is on with `token` and sends it; waits
/// for the overview.
async fn log_in(browser: &Browser, token: &str) {
    let client = &browser.client;
    client
        .find(Locator::Css("input#token"))
        .await
        .unwrap()
        .send_keys(token)
        .await
        .unwrap();
    client
        .find(Locator::Css("button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    poll(
        Duration::from_secs(10),
        "the overview after login",
        async || {
            let url = client.current_url().await.map_err(|e| e.to_string())?;
            (url.path() == "/").then_some(()).ok_or(url.to_string())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_pages_in_a_real_browser() {
    let before = valid_leaf();
    let after = valid_leaf();
    let first = TlsServer::start_leaf(&before, TlsOpts::default());
    let renewed = TlsServer::start_leaf(&after, TlsOpts::default());
    let gate = Gate::start(first.addr).await;
    let staging = TlsServer::start_leaf(&staging_leaf(), TlsOpts::default());
    let refused = refused_addr();

    let api = free_addr();
    let env = Env::new();
    env.api_with_token(api, TOKEN);
    let site_url = format!("https://{HOST}:{}/", gate.addr.port());
    // A check first due in about 12 hours: NO DATA all along the test.
    let later_hour = (time::OffsetDateTime::now_utc().hour() + 12) % 24;
    env.write_checks(
        "checks.toml",
        &[
            check_toml(
                "site",
                &site_url,
                &format!("{EVERY}\nlabels = {{ env = \"prod\" }}"),
            ),
            check_toml(
                "staging-app",
                &staging.url("/"),
                &format!("{EVERY}\nlabels = {{ env = \"staging\" }}"),
            ),
            check_toml(
                "broken",
                &format!("https://{HOST}:{}/", refused.port()),
                EVERY,
            ),
            check_toml(
                "later",
                &site_url,
                &format!("schedule = \"0 0 {later_hour} * * *\"\ntimeout = \"5s\""),
            ),
        ]
        .concat(),
    );
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.token = Some(TOKEN.to_string());
    daemon.wait_healthy(Duration::from_secs(30)).await;
    let first_leaf = sha256(&before.cert);
    poll(
        Duration::from_secs(20),
        "the first leaf served",
        async || {
            let seen = served_leaf(&daemon, "site").await?;
            (seen == first_leaf).then_some(()).ok_or(seen)
        },
    )
    .await;
    // The renewal, as a client sees it: the same name, a new leaf.
    gate.point_to(renewed.addr);
    let second_leaf = sha256(&after.cert);
    poll(
        Duration::from_secs(20),
        "the renewed leaf served",
        async || {
            let seen = served_leaf(&daemon, "site").await?;
            (seen == second_leaf).then_some(()).ok_or(seen)
        },
    )
    .await;

    let (code, body) = daemon
        .post(
            "/api/v1/silences",
            &json!({ "pattern": "staging-*", "for": "1h", "reason": "moving the CA" }),
        )
        .await
        .unwrap();
    assert_eq!(code, 201, "{body}");
    let checks = daemon.get_json("/api/v1/checks").await.unwrap();
    let broken_reason = checks["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "broken")
        .and_then(|c| c["latest"]["failures"][0]["message"].as_str())
        .unwrap_or_else(|| panic!("broken has failed by now: {checks}"))
        .to_string();

    let origin = format!("http://{api}");
    let browser = Browser::start().await;
    let client = &browser.client;

    // Without a session, a page sends the browser to the login form.
    client.goto(&format!("{origin}/")).await.unwrap();
    assert_eq!(client.current_url().await.unwrap().path(), "/login");
    log_in(&browser, TOKEN).await;

    // The overview: every check with its status in words, grouped by env.
    let cards = texts(&browser, "li.check").await;
    assert_eq!(cards.len(), 4, "{cards:?}");
    let card = |name: &str| {
        cards
            .iter()
            .find(|c| c.contains(name))
            .unwrap_or_else(|| panic!("no card for {name} in {cards:?}"))
            .clone()
    };
    assert!(card("site").contains("UP"), "{}", card("site"));
    assert!(card("broken").contains("DOWN"), "{}", card("broken"));
    // Each card says why: the DOWN card its first failure, the silenced
    // one the silence and its end, the NO DATA one its first probe.
    let reasons = texts(&browser, "li.check p.reason.down").await;
    assert!(reasons.contains(&broken_reason), "{reasons:?}");
    assert!(
        card("broken").contains(&broken_reason),
        "{}",
        card("broken")
    );
    let silenced = texts(&browser, "li.check p.hold").await;
    assert_eq!(silenced.len(), 1, "{silenced:?}");
    assert!(
        silenced[0].starts_with("SILENCED silence staging-* until ")
            && silenced[0].ends_with(" UTC: moving the CA"),
        "{silenced:?}"
    );
    assert!(
        card("staging-app").contains(&silenced[0]),
        "{}",
        card("staging-app")
    );
    assert!(card("later").contains("NO DATA"), "{}", card("later"));
    assert!(
        card("later").contains(&format!("first probe at {later_hour:02}:")),
        "{}",
        card("later")
    );
    assert!(
        card("staging-app").contains("STAGING issuer"),
        "the staging issuer is flagged in words: {}",
        card("staging-app")
    );
    // Shown in capitals by the stylesheet; the words are what matters.
    let groups: Vec<String> = texts(&browser, "section.group h2")
        .await
        .iter()
        .map(|g| g.to_lowercase())
        .collect();
    assert_eq!(groups, ["env = prod", "env = staging", "no env"]);
    for bar in client.find_all(Locator::Css("div.bar")).await.unwrap() {
        let days = bar.find_all(Locator::Css("i")).await.unwrap();
        assert_eq!(days.len(), 90, "one element per day");
    }
    assert_eq!(
        count(&browser, "div.bar i:last-child:not(.none)").await,
        3,
        "today has results for every check"
    );
    // Hovering a bar gives every day its figures.
    let site_bar = client
        .find(Locator::Css("li.check div.bar[data-uptime*='/site?']"))
        .await
        .unwrap();
    let bar_arg = || vec![serde_json::to_value(&site_bar).unwrap()];
    client
        .execute(
            "arguments[0].lastElementChild.dispatchEvent(new MouseEvent('mouseover', {bubbles: true}));",
            bar_arg(),
        )
        .await
        .unwrap();
    let today = poll(Duration::from_secs(10), "the hover figures", async || {
        let title = client
            .execute("return arguments[0].lastElementChild.title;", bar_arg())
            .await
            .map_err(|e| e.to_string())?;
        match title.as_str() {
            Some(t) if t.contains("% up") => Ok(t.to_string()),
            _ => Err(title.to_string()),
        }
    })
    .await;
    assert!(today.contains("% up ("), "{today}");
    let yesterday = client
        .execute(
            "return arguments[0].lastElementChild.previousElementSibling.title;",
            bar_arg(),
        )
        .await
        .unwrap();
    assert!(
        yesterday
            .as_str()
            .unwrap_or_default()
            .ends_with(": no results"),
        "{yesterday}"
    );
    browser.save("overview").await;

    // A check's page: the chart and the timeline with the renewal.
    client.goto(&format!("{origin}/checks/site")).await.unwrap();
    assert!(
        count(&browser, "svg.chart polyline.series").await
            + count(&browser, "svg.chart circle.dot").await
            >= 3,
        "p50, p95 and max drawn"
    );
    assert_eq!(
        count(&browser, "svg.timeline g.leaf").await,
        2,
        "two leaves served"
    );
    assert_eq!(count(&browser, "svg.timeline line.renewal").await, 1);
    let leaves = texts(&browser, "ul.leaves li").await;
    assert!(leaves[0].starts_with(&first_leaf[..16]), "{leaves:?}");
    assert!(leaves[1].starts_with(&second_leaf[..16]), "{leaves:?}");
    // The whole page in one picture.
    client.set_window_size(1280, 1900).await.unwrap();
    browser.save("check").await;
    client.set_window_size(1280, 1000).await.unwrap();
    client
        .goto(&format!("{origin}/checks/site?range=7d"))
        .await
        .unwrap();
    assert!(count(&browser, "svg.chart").await == 1);

    // Incidents: the broken check's failure streak is open.
    client.goto(&format!("{origin}/incidents")).await.unwrap();
    let rows = texts(&browser, "table.incidents tbody tr.open").await;
    assert!(
        rows.iter()
            .any(|r| r.contains("broken") && r.contains("open")),
        "{rows:?}"
    );
    browser.save("incidents").await;

    // Dark mode.
    browser.dark(&format!("{origin}/")).await;
    browser.save("overview-dark").await;

    // Nothing came from another origin, and the console is clean.
    browser.assert_only_from(&origin).await;

    // The session is a random id that expires, in an HttpOnly,
    // SameSite=Strict cookie (plain HTTP here: no `Secure`).
    let cookie = client.get_named_cookie("vigie_session").await.unwrap();
    assert_eq!(cookie.value().len(), 64, "{cookie:?}");
    assert!(!cookie.value().contains(TOKEN), "{cookie:?}");
    assert_eq!(cookie.http_only(), Some(true), "{cookie:?}");
    assert_eq!(
        format!("{:?}", cookie.same_site()),
        "Some(Strict)",
        "{cookie:?}"
    );
    assert!(cookie.expires().is_some(), "an expiry: {cookie:?}");

    // `?token=` no longer logs in: the token must not sit in the history.
    client.delete_all_cookies().await.unwrap();
    client
        .goto(&format!("{origin}/incidents?token={TOKEN}"))
        .await
        .unwrap();
    let url = client.current_url().await.unwrap();
    assert_eq!(url.path(), "/login", "{url}");
    assert!(client.get_all_cookies().await.unwrap().is_empty());
    // The form it lands on does.
    log_in(&browser, TOKEN).await;
    client.goto(&format!("{origin}/incidents")).await.unwrap();
    assert!(count(&browser, "table.incidents").await == 1);

    browser.close().await;
    daemon.stop(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_json_behind_the_pages_and_the_page_headers() {
    let server = TlsServer::start_leaf(&valid_leaf(), TlsOpts::default());
    let api = free_addr();
    let env = Env::with_config(&api_section(api, None));
    env.write_checks("site.toml", &check_toml("site", &server.url("/"), EVERY));
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.wait_healthy(Duration::from_secs(30)).await;
    // One entry per day of the window, `null` figures where no data.
    let uptime = poll(Duration::from_secs(20), "a day of uptime", async || {
        let view = daemon.get_json("/api/v1/uptime/site?days=90").await?;
        match view["days"].as_array().map(Vec::len) {
            Some(90) if view["days"][89]["up"].as_u64() >= Some(2) => Ok(view),
            _ => Err(view.to_string()),
        }
    })
    .await;
    let today = &uptime["days"][89];
    assert_eq!(today["uptime"], 1.0, "{uptime}");
    assert!(today["p50_ms"].as_f64().unwrap() > 0.0, "{uptime}");
    let yesterday = &uptime["days"][88];
    assert_eq!(yesterday["uptime"], Value::Null, "{uptime}");
    assert_eq!(yesterday["p50_ms"], Value::Null, "{uptime}");
    let (code, body) = daemon.get("/api/v1/uptime/site?days=0").await.unwrap();
    assert_eq!(code, 400, "{body}");
    let (code, body) = daemon.get("/api/v1/uptime/nope?days=7").await.unwrap();
    assert_eq!(code, 404, "{body}");
    let error: Value = serde_json::from_str(&body).unwrap();
    assert!(error["error"].as_str().unwrap().contains("nope"), "{body}");
    // An unknown check's page: the layout, and a way home.
    let (code, page) = daemon.get("/checks/nope").await.unwrap();
    assert_eq!(code, 404, "{page}");
    assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
    assert!(
        page.contains("<a href=\"/\">Back to the overview</a>"),
        "{page}"
    );

    let certificates = daemon.get_json("/api/v1/certificates/site").await.unwrap();
    let leaves = certificates["certificates"].as_array().unwrap();
    assert_eq!(leaves.len(), 1, "{certificates}");
    assert_eq!(leaves[0]["staging"], false);

    let (code, page) = daemon.get("/").await.unwrap();
    assert_eq!(code, 200);
    assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
    assert!(page.contains("site"));
    daemon.stop(Duration::from_secs(10)).await;
}
