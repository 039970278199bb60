//! Helpers for the cors-check tests: preflight answers for a scripted
//! [`TlsServer::start_with`] server, and running a `kind = "cors"` check
//! through vigie's real load -> probe -> evaluate path.

use std::sync::Arc;

use vigie::outcome::{CorsReport, Outcome};

use super::env::{pretty, Env};
use super::pki::Leaf;
use super::servers::{Handler, RecordedRequest, TlsOpts, TlsServer};

/// The app's origin every cors check here uses.
pub const APP: &str = "https://app.example.com";
/// Origins that must not be admitted.
pub const EVIL: &str = "https://evil.example";
pub const EVIL2: &str = "https://attacker.example.net";

/// One `[[check]]` of kind cors for `url` with `origin = APP`, connecting to
/// 127.0.0.1, plus `extra` lines.
pub fn cors_check_toml(name: &str, url: &str, extra: &str) -> String {
    format!(
        "[[check]]\nname = {name:?}\nkind = \"cors\"\nurl = {url:?}\nresolve = \"127.0.0.1\"\n\
         origin = {APP:?}\n{extra}\n"
    )
}

/// Runs one cors check against `url` (origin [`APP`], plus `extra` keys) and
/// returns its outcome.
pub async fn probe_cors(url: &str, extra: &str) -> Outcome {
    let env = Env::new();
    env.write_checks("cors.toml", &cors_check_toml("t", url, extra));
    env.run_all().await.remove(0)
}

/// The outcome's cors report, or a panic showing the whole outcome.
pub fn cors_report(outcome: &Outcome) -> &CorsReport {
    outcome
        .cors
        .as_ref()
        .unwrap_or_else(|| panic!("no cors report in {}", pretty(outcome)))
}

/// The failed assertions' names, in order.
pub fn assertion_names(outcome: &Outcome) -> Vec<&'static str> {
    outcome
        .failures
        .iter()
        .map(|f| f.assertion.as_str())
        .collect()
}

/// A preflight answer: status, headers (in order, repeats allowed), body.
pub type Answer = (u16, Vec<(String, String)>, String);

/// `(status, headers, "")` with owned strings.
pub fn answer(status: u16, headers: &[(&str, &str)]) -> Answer {
    (
        status,
        headers
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        String::new(),
    )
}

/// The request's `Origin` header ("" if none).
pub fn origin_of(req: &RecordedRequest) -> String {
    req.headers
        .get("origin")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// A scripted TLS server answering every request with `f(request)`.
pub fn scripted(
    leaf: &Leaf,
    f: impl Fn(&RecordedRequest) -> Answer + Send + Sync + 'static,
) -> TlsServer {
    let handler: Handler = Arc::new(f);
    TlsServer::start_with(leaf, TlsOpts::default(), handler)
}

/// A scripted TLS server giving the same answer to every request.
pub fn fixed(leaf: &Leaf, status: u16, headers: &[(&str, &str)]) -> TlsServer {
    let ans = answer(status, headers);
    scripted(leaf, move |_| ans.clone())
}

/// A well-configured bucket: 200 to [`APP`] with `Access-Control-Allow-Origin:
/// APP`, `extra` headers, and `Vary: Origin`; 403 to every other origin
/// (S3-style XML body). Further headers for `APP` only.
pub fn app_only(leaf: &Leaf, extra: &[(&str, &str)]) -> TlsServer {
    let mut headers = vec![("Access-Control-Allow-Origin", APP), ("Vary", "Origin")];
    headers.extend_from_slice(extra);
    let ok = answer(200, &headers);
    scripted(leaf, move |req| {
        if origin_of(req) == APP {
            ok.clone()
        } else {
            s3_refusal()
        }
    })
}

/// The 403 S3 gives a preflight no rule matches.
pub fn s3_refusal() -> Answer {
    (
        403,
        vec![("Content-Type".into(), "application/xml".into())],
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AccessForbidden</Code>\
         <Message>CORSResponse: This CORS request is not allowed. This is usually because the \
         evalution of Origin, request method / Access-Control-Request-Method or \
         Access-Control-Request-Headers are not whitelisted by the resource's CORS spec.\
         </Message><Method>PUT</Method><ResourceType>OBJECT</ResourceType>\
         <RequestId>TESTREQ1</RequestId></Error>"
            .into(),
    )
}
