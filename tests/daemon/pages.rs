//! The status pages in a real browser: Debian's headless Chromium, through
//! chromedriver, against the real daemon and real loopback targets. One
//! target's certificate is swapped while the test runs, so its timeline
//! shows a renewal. Screenshots of every page are saved under
//! `target/screenshots/` for a person to look at.

use std::time::Duration;

use crate::common::browser::Browser;
use crate::common::daemon::{api_section, free_addr, poll, vigie_cli_async, Daemon};
use crate::common::env::{check_toml, Env};
use crate::common::gate::Gate;
use crate::common::*;
use fantoccini::Locator;
use serde_json::{json, Value};

const TOKEN: &str = "page-token-0123456789abcdef0123456789";
const EVERY: &str = "every = \"1s\"\ntimeout = \"5s\"";

async fn texts(browser: &Browser, css: &str) -> Vec<String> {
    try_texts(browser, css).await.unwrap()
}

/// [`texts`], for a page that may be changing under it (a form just
/// sent): the error says what went wrong instead of ending the test.
async fn try_texts(browser: &Browser, css: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let found = browser.client.find_all(Locator::Css(css)).await;
    for element in found.map_err(|e| e.to_string())? {
        out.push(element.text().await.map_err(|e| e.to_string())?);
    }
    Ok(out)
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

/// Clicks the element `css` selects.
async fn click(browser: &Browser, css: &str) {
    let element = browser.client.find(Locator::Css(css)).await.unwrap();
    element.click().await.unwrap();
}

/// Starts vigie on `api` with [`TOKEN`] required, once `env`'s checks
/// are written, and waits until it is healthy.
async fn daemon_with_token(env: &Env, api: std::net::SocketAddr) -> Daemon {
    env.api_with_token(api, TOKEN);
    let mut daemon = Daemon::spawn(&env.config_path(), api);
    daemon.token = Some(TOKEN.to_string());
    daemon.wait_healthy(Duration::from_secs(30)).await;
    daemon
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
    click(browser, "button[type=submit]").await;
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
    let mut daemon = daemon_with_token(&env, api).await;
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
    // Every card's state (DOWN with its reason, SILENCED, NO DATA) in
    // light and dark, on a desktop and a phone.
    browser
        .save_views(&format!("{origin}/"), "overview-states")
        .await;

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

/// The session cookie the browser holds.
async fn session_cookie(browser: &Browser) -> String {
    let cookie = browser
        .client
        .get_named_cookie("vigie_session")
        .await
        .unwrap();
    format!("vigie_session={}", cookie.value())
}

/// POSTs a form to `url` as a browser would, with `cookie` and `origin`.
async fn post_form(url: &str, cookie: &str, origin: Option<&str>, form: &str) -> (u16, String) {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut request = client
        .post(url)
        .header("cookie", cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form.to_string());
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    let response = request.send().await.unwrap();
    let code = response.status().as_u16();
    (code, response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn incidents_apart_from_blips_with_updates_written_from_the_page() {
    let refused = refused_addr();
    let api = free_addr();
    let env = Env::with_config(
        "[alerting]\nto = [\"oncall@example.test\"]\nfailure_threshold = 2\ngroup_window = \"1s\"\n",
    );
    let down_url = format!("https://{HOST}:{}/", refused.port());
    env.write_checks(
        "checks.toml",
        &[
            check_toml("broken", &down_url, EVERY),
            // Failing all along, but under its threshold: a blip.
            check_toml(
                "flaky",
                &down_url,
                &format!("{EVERY}\n[check.alert]\nfailure_threshold = 1000"),
            ),
        ]
        .concat(),
    );
    let mut daemon = daemon_with_token(&env, api).await;
    // The incident is known, and mail was told of it.
    let key = poll(
        Duration::from_secs(30),
        "broken's incident, told by mail",
        async || {
            let listed = daemon.get_json("/api/v1/incidents?check=broken").await?;
            let key = listed["incidents"][0]["key"]
                .as_str()
                .ok_or(listed.to_string())?
                .to_string();
            let (_, page) = daemon.get("/incidents").await?;
            match page.contains("<strong>DOWN</strong>: mail 20") {
                true => Ok(key),
                false => Err(page),
            }
        },
    )
    .await;
    // The on-call person writes the first update from a shell.
    let out = vigie_cli_async(
        &env.config_path(),
        &[
            "incident",
            "note",
            "broken",
            "--state",
            "identified",
            "**DNS** is broken <script>alert(1)</script>",
        ],
    )
    .await;
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains(&key), "{said}");

    let origin = format!("http://{api}");
    let browser = Browser::start().await;
    let client = &browser.client;
    client.goto(&format!("{origin}/login")).await.unwrap();
    log_in(&browser, TOKEN).await;

    // `/incidents`: the alerter's incident with who was told, its update
    // rendered from Markdown with the script as text; the blip apart.
    client.goto(&format!("{origin}/incidents")).await.unwrap();
    let incidents = texts(&browser, "table.incidents tbody.incident").await;
    assert_eq!(incidents.len(), 1, "{incidents:?}");
    assert!(incidents[0].contains("broken"), "{incidents:?}");
    assert!(incidents[0].contains("DOWN: mail 20"), "{incidents:?}");
    let blips = texts(&browser, "ul.blips li").await;
    assert_eq!(blips.len(), 1, "{blips:?}");
    assert!(blips[0].starts_with("flaky "), "{blips:?}");
    assert!(blips[0].contains("open"), "{blips:?}");
    let shown = |updates: Vec<String>| {
        assert_eq!(updates.len(), 1, "{updates:?}");
        assert!(
            updates[0].starts_with("IDENTIFIED ")
                && updates[0].ends_with("DNS is broken <script>alert(1)</script>"),
            "{updates:?}"
        );
    };
    shown(texts(&browser, "ol.updates li").await);
    assert_eq!(texts(&browser, "ol.updates .text strong").await, ["DNS"]);
    assert_eq!(count(&browser, "ol.updates script").await, 0);
    browser
        .save_views(&format!("{origin}/incidents"), "incidents-updates")
        .await;

    // The check's page: the same incident and update; the blip's page
    // lists it under blips only.
    client
        .goto(&format!("{origin}/checks/broken"))
        .await
        .unwrap();
    shown(texts(&browser, "ol.updates li").await);
    client
        .goto(&format!("{origin}/checks/flaky"))
        .await
        .unwrap();
    assert_eq!(count(&browser, "table.incidents").await, 0);
    assert_eq!(count(&browser, "ul.blips li").await, 1);
    browser
        .save_views(&format!("{origin}/checks/broken"), "check-updates")
        .await;
    browser
        .save_views(&format!("{origin}/"), "overview-incidents")
        .await;

    // The incident's page: an update written in the form shows first.
    client.goto(&format!("{origin}/incidents")).await.unwrap();
    click(&browser, "a.write").await;
    let page_path = format!("/incidents/{key}");
    assert_eq!(client.current_url().await.unwrap().path(), page_path);
    click(&browser, "select#state option[value=monitoring]").await;
    client
        .find(Locator::Css("textarea#text"))
        .await
        .unwrap()
        .send_keys("Fixed by *restarting* the resolver")
        .await
        .unwrap();
    click(&browser, "form.update button[type=submit]").await;
    let updates = poll(
        Duration::from_secs(10),
        "the update on the page",
        async || {
            let url = client.current_url().await.map_err(|e| e.to_string())?;
            let updates = try_texts(&browser, "ol.updates li").await?;
            match (url.path() == page_path, updates.len()) {
                (true, 2) => Ok(updates),
                other => {
                    let page = client.source().await.unwrap_or_default();
                    Err(format!("{other:?} at {url}: {page}"))
                }
            }
        },
    )
    .await;
    assert!(
        updates[0].starts_with("MONITORING ")
            && updates[0].ends_with("Fixed by restarting the resolver"),
        "newest first: {updates:?}"
    );
    assert!(updates[1].starts_with("IDENTIFIED "), "{updates:?}");
    assert_eq!(
        texts(&browser, "ol.updates li:first-child .text em").await,
        ["restarting"]
    );
    browser
        .save_views(&format!("{origin}{page_path}"), "incident")
        .await;

    // Too long a text: refused, the reason said, the text kept.
    let long = "x".repeat(9000);
    client
        .execute(
            "document.querySelector('textarea#text').value = arguments[0];",
            vec![json!(long)],
        )
        .await
        .unwrap();
    click(&browser, "form.update button[type=submit]").await;
    let problem = poll(Duration::from_secs(10), "the refusal", async || {
        let said = try_texts(&browser, "form.update p.bad").await?;
        said.first().cloned().ok_or("no refusal yet".to_string())
    })
    .await;
    assert!(problem.contains("more than the 8192 allowed"), "{problem}");
    let kept = client
        .execute(
            "return document.querySelector('textarea#text').value.length;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(kept, json!(9000));
    // As it stands: a reload would show a fresh form.
    browser.save("incident-refused").await;

    // A forged post: the session's cookie without its anti-forgery token,
    // or from another site, changes nothing.
    let cookie = session_cookie(&browser).await;
    let post_url = format!("{origin}/incidents/{key}/updates");
    let (code, body) = post_form(
        &post_url,
        &cookie,
        Some(&origin),
        "state=resolved&text=forged",
    )
    .await;
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("anti-forgery token"), "{body}");
    let csrf = client
        .find(Locator::Css("form.update input[name=csrf]"))
        .await
        .unwrap()
        .attr("value")
        .await
        .unwrap()
        .unwrap();
    let form = format!("csrf={csrf}&state=resolved&text=forged");
    let (code, body) = post_form(&post_url, &cookie, Some("http://evil.example"), &form).await;
    assert_eq!(code, 403, "{body}");
    let (code, body) = post_form(&post_url, &cookie, None, &form).await;
    assert_eq!(code, 403, "{body}");
    // The same form from vigie's own origin is taken.
    let (code, body) = post_form(&post_url, &cookie, Some(&origin), &form).await;
    assert_eq!(code, 303, "{body}");
    let listed = daemon
        .get_json(&format!("/api/v1/incidents/{key}/updates"))
        .await
        .unwrap();
    let states: Vec<&str> = listed["updates"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u["state"].as_str())
        .collect();
    assert_eq!(states, ["identified", "monitoring", "resolved"], "{listed}");

    browser.close().await;
    daemon.stop(Duration::from_secs(10)).await;
}
