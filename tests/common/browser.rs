//! A real browser for the status-page tests: Debian's headless Chromium,
//! driven through chromedriver (WebDriver) with fantoccini. Both are
//! installed by scripts/test.sh; a test without them fails and says how to
//! get them.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder};
use serde_json::{json, Value};

/// chromedriver on a loopback port, killed when dropped.
pub struct Browser {
    driver: Child,
    pub port: u16,
    pub client: Client,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session.
    pub async fn start() -> Browser {
        for tool in ["chromium", "chromedriver"] {
            assert!(
                which(tool),
                "{tool} not found: install Debian's chromium and chromium-driver \
                 (apt-get install chromium chromium-driver), or run ./scripts/test.sh, which does"
            );
        }
        let port = {
            let probe = TcpListener::bind("127.0.0.1:0").expect("a free port");
            probe.local_addr().unwrap().port()
        };
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu",
                    "--disable-dev-shm-usage", "--window-size=1280,1000",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-default-apps", "--metrics-recording-only",
                ],
            },
            "goog:loggingPrefs": { "browser": "ALL" },
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!()
        };
        let url = format!("http://127.0.0.1:{port}");
        let mut last = None;
        for _ in 0..100 {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
            {
                Ok(client) => {
                    return Browser {
                        driver,
                        port,
                        client,
                    }
                }
                Err(err) => last = Some(err),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("cannot start a Chromium session through chromedriver: {last:?}");
    }

    /// Runs a DevTools command (chromedriver's `goog/cdp/execute`).
    pub async fn cdp(&self, cmd: &str, params: Value) -> Value {
        let session = self
            .client
            .session_id()
            .await
            .expect("session id")
            .expect("a session");
        let url = format!(
            "http://127.0.0.1:{}/session/{session}/goog/cdp/execute",
            self.port
        );
        raw_post(&url, &json!({ "cmd": cmd, "params": params })).await
    }

    /// The browser console's entries since the last call.
    pub async fn console(&self) -> Vec<Value> {
        let session = self
            .client
            .session_id()
            .await
            .expect("session id")
            .expect("a session");
        let url = format!("http://127.0.0.1:{}/session/{session}/se/log", self.port);
        let answer = raw_post(&url, &json!({ "type": "browser" })).await;
        answer["value"].as_array().cloned().unwrap_or_default()
    }

    /// Saves what the browser shows as `target/screenshots/<name>.png`, for
    /// a person to look at.
    pub async fn save(&self, name: &str) {
        let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .expect("target/")
            .join("screenshots");
        std::fs::create_dir_all(&dir).expect("target/screenshots");
        let png = self.client.screenshot().await.expect("a screenshot");
        std::fs::write(dir.join(format!("{name}.png")), png).expect("save the screenshot");
    }

    /// Emulates a reader who prefers dark pages, opens `url` and checks
    /// the pages' dark palette is the one drawn.
    pub async fn dark(&self, url: &str) {
        self.cdp(
            "Emulation.setEmulatedMedia",
            json!({ "features": [{ "name": "prefers-color-scheme", "value": "dark" }] }),
        )
        .await;
        self.client.goto(url).await.unwrap();
        let background = self
            .client
            .execute(
                "return getComputedStyle(document.body).backgroundColor;",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(
            background,
            Value::from("rgb(19, 20, 22)"),
            "the dark palette"
        );
    }

    /// Saves `url` as `<name>-light`, `<name>-dark`, `<name>-light-390` and
    /// `<name>-dark-390`: both palettes, on a desktop and on a 390 px
    /// phone, where the page must fit the screen's width.
    pub async fn save_views(&self, url: &str, name: &str) {
        for scheme in ["light", "dark"] {
            self.cdp(
                "Emulation.setEmulatedMedia",
                json!({ "features": [{ "name": "prefers-color-scheme", "value": scheme }] }),
            )
            .await;
            for phone in [false, true] {
                let size = if phone {
                    json!({ "width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": true })
                } else {
                    json!({ "width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": false })
                };
                self.cdp("Emulation.setDeviceMetricsOverride", size).await;
                self.client.goto(url).await.unwrap();
                if phone {
                    let wide = self
                        .client
                        .execute("return document.documentElement.scrollWidth;", vec![])
                        .await
                        .unwrap();
                    assert!(
                        wide.as_u64().is_some_and(|w| w <= 390),
                        "{url} is {wide} px wide on a 390 px screen"
                    );
                }
                let suffix = if phone { "-390" } else { "" };
                self.save(&format!("{name}-{scheme}{suffix}")).await;
            }
        }
        self.cdp("Emulation.clearDeviceMetricsOverride", json!({}))
            .await;
        self.cdp(
            "Emulation.setEmulatedMedia",
            json!({ "features": [{ "name": "prefers-color-scheme", "value": "light" }] }),
        )
        .await;
    }

    /// Asserts that everything the page loaded came from `origin` and the
    /// console holds no error (a Content-Security-Policy violation is one).
    pub async fn assert_only_from(&self, origin: &str) {
        let resources = self
            .client
            .execute(
                "return performance.getEntriesByType('resource').map(e => e.name);",
                vec![],
            )
            .await
            .unwrap();
        let resources: Vec<String> = serde_json::from_value(resources).unwrap();
        assert!(!resources.is_empty(), "the stylesheet at least");
        for url in &resources {
            assert!(url.starts_with(origin), "{url} is not from {origin}");
        }
        let errors: Vec<Value> = self
            .console()
            .await
            .into_iter()
            .filter(|entry| entry["level"] == "SEVERE")
            .collect();
        assert!(errors.is_empty(), "console errors: {errors:?}");
    }

    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
    }
}

/// POSTs JSON to chromedriver itself (plain HTTP on loopback).
async fn raw_post(url: &str, body: &Value) -> Value {
    use http_body_util::{BodyExt, Full};
    use hyper_util::client::legacy::{connect::HttpConnector, Client as HttpClient};
    let client: HttpClient<HttpConnector, Full<hyper::body::Bytes>> =
        HttpClient::builder(hyper_util::rt::TokioExecutor::new()).build(HttpConnector::new());
    let request = hyper::Request::post(url)
        .header("content-type", "application/json")
        .body(Full::new(body.to_string().into()))
        .expect("a request");
    let response = client
        .request(request)
        .await
        .unwrap_or_else(|e| panic!("POST {url}: {e}"));
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("chromedriver's answer")
        .to_bytes();
    serde_json::from_slice(&bytes).expect("chromedriver answers JSON")
}

fn which(tool: &str) -> bool {
    std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
        .unwrap_or(false)
}
