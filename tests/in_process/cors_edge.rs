//! The cors check against preflight answers a real S3 does not give on
//! demand (missing or odd Access-Control-* headers, wildcards with
//! credentials, redirects), from a scripted rustls server on loopback, and
//! the exact preflight requests vigie sends. Judgment follows the Fetch
//! standard ("CORS check", "CORS-preflight fetch").

use crate::common::cors_server::*;
use crate::common::env::pretty;
use crate::common::*;
use vigie::outcome::Status;

const OBJECT: &str = "/uploads/probe-object";

fn header<'a>(req: &'a RecordedRequest, name: &str) -> Option<&'a str> {
    req.headers.get(name).map(|v| v.to_str().unwrap())
}

/// Asserts the failures are exactly `expected` (names, in order) and the
/// status is down (or up when none are expected).
#[track_caller]
fn assert_failures(outcome: &vigie::outcome::Outcome, expected: &[&str]) {
    assert_eq!(assertion_names(outcome), expected, "{}", pretty(outcome));
    let status = if expected.is_empty() {
        Status::Up
    } else {
        Status::Down
    };
    assert_eq!(outcome.status, status, "{}", pretty(outcome));
}

// ------------------------------------------------------ the request itself

#[tokio::test(flavor = "multi_thread")]
async fn preflight_is_exactly_what_a_browser_sends() {
    let server = app_only(
        &valid_leaf(),
        &[
            ("Access-Control-Allow-Methods", "PUT"),
            ("Access-Control-Allow-Headers", "content-type, x-amz-meta-a"),
        ],
    );
    let outcome = probe_cors(
        &server.url(OBJECT),
        r#"request_headers = ["Content-Type", "x-amz-meta-a"]
deny_origins = ["https://evil.example", "https://attacker.example.net"]"#,
    )
    .await;
    assert_failures(&outcome, &[]);

    let recorded = server.recorded_requests();
    assert_eq!(recorded.len(), 3, "{recorded:#?}");
    for (req, origin) in recorded.iter().zip([APP, EVIL, EVIL2]) {
        assert_eq!(req.method, "OPTIONS");
        assert_eq!(req.uri, OBJECT);
        assert_eq!(header(req, "origin"), Some(origin));
        assert_eq!(header(req, "access-control-request-method"), Some("PUT"));
        assert_eq!(
            header(req, "access-control-request-headers"),
            Some("content-type,x-amz-meta-a")
        );
        assert_eq!(
            header(req, "host"),
            Some(format!("{HOST}:{}", server.port()).as_str())
        );
        // A preflight never carries credentials.
        for name in ["cookie", "authorization"] {
            assert_eq!(header(req, name), None, "{name} sent: {req:#?}");
        }
    }
    // Every preflight on its own connection and full handshake.
    assert_eq!(server.handshakes(), 3);

    let report = cors_report(&outcome);
    assert_eq!(report.preflight_status, 200);
    assert_eq!(report.allow_origin.as_deref(), Some(APP));
    assert_eq!(report.allow_methods, ["PUT"]);
    assert_eq!(report.allow_headers, ["content-type", "x-amz-meta-a"]);
    assert_eq!(report.vary.as_deref(), Some("Origin"));
    let denied: Vec<_> = report
        .denied
        .iter()
        .map(|d| (d.origin.as_str(), d.admitted, d.allow_origin.as_deref()))
        .collect();
    assert_eq!(denied, [(EVIL, false, None), (EVIL2, false, None)]);
    // The chain of the bucket's URL is reported as for http checks.
    let tls = outcome.tls.as_ref().expect("tls report");
    assert!(tls.trusted, "{}", pretty(&outcome));
    assert_eq!(tls.chain.len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn request_headers_are_lower_cased_sorted_and_deduplicated() {
    // Browsers send the CORS-unsafe header names sorted (Fetch), whatever
    // order the page set them in.
    let server = app_only(
        &valid_leaf(),
        &[
            ("Access-Control-Allow-Methods", "PUT"),
            ("Access-Control-Allow-Headers", "*"),
        ],
    );
    let outcome = probe_cors(
        &server.url(OBJECT),
        r#"request_headers = ["X-Amz-Meta-B", "content-type", "x-amz-meta-b"]"#,
    )
    .await;
    assert_failures(&outcome, &[]);
    let req = &server.recorded_requests()[0];
    assert_eq!(
        header(req, "access-control-request-headers"),
        Some("content-type,x-amz-meta-b")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn no_request_headers_no_access_control_request_headers() {
    let server = app_only(&valid_leaf(), &[("Access-Control-Allow-Methods", "PUT")]);
    let outcome = probe_cors(&server.url(OBJECT), "").await;
    assert_failures(&outcome, &[]);
    let recorded = server.recorded_requests();
    assert_eq!(recorded.len(), 1);
    assert_eq!(
        header(&recorded[0], "access-control-request-method"),
        Some("PUT")
    );
    assert_eq!(header(&recorded[0], "access-control-request-headers"), None);
    assert!(cors_report(&outcome).denied.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn method_is_sent_as_configured() {
    let server = app_only(&valid_leaf(), &[("Access-Control-Allow-Methods", "DELETE")]);
    let outcome = probe_cors(&server.url(OBJECT), r#"method = "DELETE""#).await;
    assert_failures(&outcome, &[]);
    assert_eq!(
        header(
            &server.recorded_requests()[0],
            "access-control-request-method"
        ),
        Some("DELETE")
    );
}

// ------------------------------------------------ Access-Control-Allow-Origin

#[tokio::test(flavor = "multi_thread")]
async fn missing_allow_origin_fails_origin() {
    let server = fixed(
        &valid_leaf(),
        200,
        &[("Access-Control-Allow-Methods", "PUT")],
    );
    let outcome = probe_cors(&server.url(OBJECT), "").await;
    assert_failures(&outcome, &["cors.origin"]);
    let f = crate::common::env::failure(&outcome, "cors.origin");
    assert_eq!(f.observed, "none", "{}", pretty(&outcome));
    assert!(f.expected.contains(APP), "{}", pretty(&outcome));
    assert_eq!(cors_report(&outcome).allow_origin, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn another_origin_or_a_near_miss_fails_origin() {
    for acao in [
        "https://other.example.com",
        "https://app.example.com/",
        "HTTPS://APP.EXAMPLE.COM",
        "http://app.example.com",
        "null",
    ] {
        let server = fixed(
            &valid_leaf(),
            200,
            &[
                ("Access-Control-Allow-Origin", acao),
                ("Access-Control-Allow-Methods", "PUT"),
            ],
        );
        let outcome = probe_cors(&server.url(OBJECT), "").await;
        assert_failures(&outcome, &["cors.origin"]);
        let f = crate::common::env::failure(&outcome, "cors.origin");
        assert!(f.observed.contains(acao), "{acao}: {}", pretty(&outcome));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn doubled_allow_origin_fails_origin() {
    // Two Access-Control-Allow-Origin lines (a proxy adding its own): the
    // combined value is not the origin, browsers refuse.
    let server = fixed(
        &valid_leaf(),
        200,
        &[
            ("Access-Control-Allow-Origin", APP),
            ("Access-Control-Allow-Origin", APP),
            ("Access-Control-Allow-Methods", "PUT"),
        ],
    );
    let outcome = probe_cors(&server.url(OBJECT), "").await;
    assert_failures(&outcome, &["cors.origin"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn star_origin_needs_allow_any_origin() {
    let server = fixed(
        &valid_leaf(),
        200,
        &[
            ("Access-Control-Allow-Origin", "*"),
            ("Access-Control-Allow-Methods", "PUT"),
        ],
    );
    let outcome = probe_cors(&server.url(OBJECT), "").await;
    assert_failures(&outcome, &["cors.origin"]);
    let f = crate::common::env::failure(&outcome, "cors.origin");
    assert!(f.observed.contains('*'), "{}", pretty(&outcome));
    assert!(
        f.message.contains("allow_any_origin"),
        "{}",
        pretty(&outcome)
    );

    let outcome = probe_cors(&server.url(OBJECT), "allow_any_origin = true").await;
    assert_failures(&outcome, &[]);
    assert_eq!(cors_report(&outcome).allow_origin.as_deref(), Some("*"));
}

#[tokio::test(flavor = "multi_thread")]
async fn star_origin_with_allow_credentials_fails_even_with_allow_any_origin() {
    let server = fixed(
        &valid_leaf(),
        200,
        &[
            ("Access-Control-Allow-Origin", "*"),
            ("Access-Control-Allow-Credentials", "true"),
            ("Access-Control-Allow-Methods", "PUT"),
        ],
    );
    for extra in ["", "allow_any_origin = true"] {
        let outcome = probe_cors(&server.url(OBJECT), extra).await;
        assert_failures(&outcome, &["cors.origin"]);
        assert_eq!(cors_report(&outcome).allow_credentials, Some(true));
        let f = crate::common::env::failure(&outcome, "cors.origin");
        assert!(f.message.contains("Credentials"), "{}", pretty(&outcome));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn star_origin_never_admits_credentials() {
    let server = fixed(
        &valid_leaf(),
        200,
        &[
            ("Access-Control-Allow-Origin", "*"),
            ("Access-Control-Allow-Methods", "PUT"),
        ],
    );
    let outcome = probe_cors(
        &server.url(OBJECT),
        "allow_any_origin = true\ncredentials = true",
    )
    .await;
    assert_failures(&outcome, &["cors.origin"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn credentials_need_allow_credentials_exactly_true() {
    for (acac, ok) in [
        (None, false),
        (Some("false"), false),
        (Some("True"), false),
        (Some("true"), true),
    ] {
        let mut headers = vec![
            ("Access-Control-Allow-Origin", APP),
            ("Access-Control-Allow-Methods", "PUT"),
        ];
        if let Some(v) = acac {
            headers.push(("Access-Control-Allow-Credentials", v));
        }
        let server = fixed(&valid_leaf(), 200, &headers);
        let outcome = probe_cors(&server.url(OBJECT), "credentials = true").await;
        let expected: &[&str] = if ok { &[] } else { &["cors.origin"] };
        assert_failures(&outcome, expected);
        // Without credentials the header does not matter.
        let outcome = probe_cors(&server.url(OBJECT), "").await;
        assert_failures(&outcome, &[]);
    }
}

// ------------------------------------- Access-Control-Allow-Methods / -Headers

#[tokio::test(flavor = "multi_thread")]
async fn missing_allow_methods_fails_methods() {
    let server = app_only(&valid_leaf(), &[]);
    let outcome = probe_cors(&server.url(OBJECT), "").await;
    assert_failures(&outcome, &["cors.methods"]);
    let f = crate::common::env::failure(&outcome, "cors.methods");
    assert!(f.expected.contains("PUT"), "{}", pretty(&outcome));
    assert_eq!(f.observed, "none");
    assert!(cors_report(&outcome).allow_methods.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn safelisted_methods_need_no_listing() {
    let server = app_only(&valid_leaf(), &[]);
    for method in ["GET", "HEAD", "POST"] {
        let outcome = probe_cors(&server.url(OBJECT), &format!("method = {method:?}")).await;
        assert_failures(&outcome, &[]);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn methods_are_a_list_across_header_lines() {
    let server = app_only(
        &valid_leaf(),
        &[
            ("Access-Control-Allow-Methods", "GET, HEAD"),
            ("Access-Control-Allow-Methods", "POST,PUT"),
        ],
    );
    let outcome = probe_cors(&server.url(OBJECT), "").await;
    assert_failures(&outcome, &[]);
    assert_eq!(
        cors_report(&outcome).allow_methods,
        ["GET", "HEAD", "POST", "PUT"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn method_case_matters_header_case_does_not() {
    // Fetch compares methods byte for byte: `put` does not allow `PUT`.
    let server = app_only(
        &valid_leaf(),
        &[
            ("Access-Control-Allow-Methods", "get, put"),
            ("Access-Control-Allow-Headers", "Content-Type"),
        ],
    );
    let outcome = probe_cors(&server.url(OBJECT), r#"request_headers = ["content-type"]"#).await;
    assert_failures(&outcome, &["cors.methods"]);
    let f = crate::common::env::failure(&outcome, "cors.methods");
    assert!(f.observed.contains("put"), "{}", pretty(&outcome));

    // Header names are case-insensitive: `Content-Type` covers `content-type`.
    let server = app_only(
        &valid_leaf(),
        &[
            ("Access-Control-Allow-Methods", "PUT"),
            ("Access-Control-Allow-Headers", "Content-Type, X-AMZ-META-A"),
        ],
    );
    let outcome = probe_cors(
        &server.url(OBJECT),
        r#"request_headers = ["content-type", "x-amz-meta-a"]"#,
    )
    .await;
    assert_failures(&outcome, &[]);
}

#[tokio::test(flavor = "multi_thread")]
async fn unlisted_header_fails_headers() {
    let server = app_only(
        &valid_leaf(),
        &[
            ("Access-Control-Allow-Methods", "PUT"),
            ("Access-Control-Allow-Headers", "content-type"),
        ],
    );
    let outcome = probe_cors(
        &server.url(OBJECT),
        r#"request_headers = ["content-type", "x-amz-meta-owner"]"#,
    )
    .await;
    assert_failures(&outcome, &["cors.headers"]);
    let f = crate::common::env::failure(&outcome, "cors.headers");
    assert!(
        f.message.contains("x-amz-meta-owner"),
        "{}",
        pretty(&outcome)
    );
    assert!(
        !f.message.contains("header content-type"),
        "{}",
        pretty(&outcome)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn star_methods_and_headers_pass_without_credentials() {
    let server = app_only(
        &valid_leaf(),
        &[
            ("Access-Control-Allow-Methods", "*"),
            ("Access-Control-Allow-Headers", "*"),
            ("Access-Control-Allow-Credentials", "true"),
        ],
    );
    let extra = r#"request_headers = ["content-type", "x-amz-meta-a"]"#;
    let outcome = probe_cors(&server.url(OBJECT), extra).await;
    assert_failures(&outcome, &[]);

    // With credentials every `*` is a literal name: nothing is allowed.
    let outcome = probe_cors(&server.url(OBJECT), &format!("{extra}\ncredentials = true")).await;
    assert_failures(&outcome, &["cors.methods", "cors.headers"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn star_headers_never_cover_authorization() {
    let server = app_only(
        &valid_leaf(),
        &[
            ("Access-Control-Allow-Methods", "PUT"),
            ("Access-Control-Allow-Headers", "*"),
        ],
    );
    let outcome = probe_cors(
        &server.url(OBJECT),
        r#"request_headers = ["authorization", "content-type"]"#,
    )
    .await;
    assert_failures(&outcome, &["cors.headers"]);
    let f = crate::common::env::failure(&outcome, "cors.headers");
    assert!(f.message.contains("authorization"), "{}", pretty(&outcome));

    // Listed by name, it is allowed.
    let server = app_only(
        &valid_leaf(),
        &[
            ("Access-Control-Allow-Methods", "PUT"),
            ("Access-Control-Allow-Headers", "*, Authorization"),
        ],
    );
    let outcome = probe_cors(
        &server.url(OBJECT),
        r#"request_headers = ["authorization", "content-type"]"#,
    )
    .await;
    assert_failures(&outcome, &[]);
}

// ------------------------------------------------------ status and redirects

#[tokio::test(flavor = "multi_thread")]
async fn redirected_preflight_fails_preflight_and_is_not_followed() {
    for status in [301, 302, 307, 308] {
        let server = scripted(&valid_leaf(), move |req| {
            if req.uri == OBJECT {
                answer(status, &[("Location", "/elsewhere/probe-object")])
            } else {
                answer(
                    200,
                    &[
                        ("Access-Control-Allow-Origin", APP),
                        ("Access-Control-Allow-Methods", "PUT"),
                    ],
                )
            }
        });
        let outcome = probe_cors(&server.url(OBJECT), "").await;
        assert_failures(&outcome, &["cors.preflight"]);
        let f = crate::common::env::failure(&outcome, "cors.preflight");
        assert!(
            f.observed.contains(&status.to_string()),
            "{}",
            pretty(&outcome)
        );
        assert!(f.observed.contains("redirect"), "{}", pretty(&outcome));
        assert!(f.message.contains("redirect"), "{}", pretty(&outcome));
        assert!(
            f.message.contains("/elsewhere/probe-object"),
            "{}",
            pretty(&outcome)
        );
        let report = cors_report(&outcome);
        assert_eq!(report.preflight_status, status);
        assert!(report.location.as_deref().unwrap().contains("/elsewhere/"));
        assert_eq!(server.recorded_requests().len(), 1, "redirect followed");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_preflight_reports_only_preflight_with_the_body() {
    let server = scripted(&valid_leaf(), |_| s3_refusal());
    let outcome = probe_cors(
        &server.url(OBJECT),
        r#"request_headers = ["content-type"]
min_max_age = "10m"
expose_headers = ["etag"]
deny_origins = ["https://evil.example"]"#,
    )
    .await;
    // Nothing but the refusal: the missing headers are its consequence.
    assert_failures(&outcome, &["cors.preflight"]);
    let f = crate::common::env::failure(&outcome, "cors.preflight");
    assert!(f.observed.starts_with("403"), "{}", pretty(&outcome));
    for text in [&f.observed, &f.message] {
        assert!(text.contains("AccessForbidden"), "{}", pretty(&outcome));
        assert!(
            text.contains("CORSResponse: This CORS request is not allowed."),
            "{}",
            pretty(&outcome)
        );
    }
    let report = cors_report(&outcome);
    assert_eq!(report.preflight_status, 403);
    assert!(report
        .refusal
        .as_deref()
        .unwrap()
        .starts_with("AccessForbidden: CORSResponse:"));
    // The deny origin was still asked, and refused.
    assert_eq!(report.denied.len(), 1);
    assert!(!report.denied[0].admitted);
    assert_eq!(server.recorded_requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn non_xml_refusal_body_is_excerpted() {
    let server = scripted(&valid_leaf(), |_| {
        (405, vec![], "Method   Not\nAllowed here".to_owned())
    });
    let outcome = probe_cors(&server.url(OBJECT), "").await;
    assert_failures(&outcome, &["cors.preflight"]);
    let f = crate::common::env::failure(&outcome, "cors.preflight");
    assert!(f.observed.contains("405"), "{}", pretty(&outcome));
    assert!(
        f.observed.contains("Method Not Allowed here"),
        "{}",
        pretty(&outcome)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn any_2xx_is_a_preflight_success() {
    let server = fixed(
        &valid_leaf(),
        204,
        &[
            ("Access-Control-Allow-Origin", APP),
            ("Access-Control-Allow-Methods", "PUT"),
        ],
    );
    let outcome = probe_cors(&server.url(OBJECT), "").await;
    assert_failures(&outcome, &[]);
    assert_eq!(cors_report(&outcome).preflight_status, 204);
}

// --------------------------------------------- Max-Age and Expose-Headers

#[tokio::test(flavor = "multi_thread")]
async fn max_age_below_minimum_fails_max_age() {
    for (max_age, ok) in [
        (Some("599"), false),
        (Some("600"), true),
        (Some("86400"), true),
        (None, false),
        (Some("ten minutes"), false),
    ] {
        let mut headers = vec![("Access-Control-Allow-Methods", "PUT")];
        if let Some(v) = max_age {
            headers.push(("Access-Control-Max-Age", v));
        }
        let server = app_only(&valid_leaf(), &headers);
        let outcome = probe_cors(&server.url(OBJECT), r#"min_max_age = "10m""#).await;
        let expected: &[&str] = if ok { &[] } else { &["cors.max_age"] };
        assert_failures(&outcome, expected);
        if let Some(f) = outcome.failures.first() {
            assert!(f.expected.contains("600"), "{}", pretty(&outcome));
        }
        // Without min_max_age, Max-Age is only reported.
        let outcome = probe_cors(&server.url(OBJECT), "").await;
        assert_failures(&outcome, &[]);
        assert_eq!(
            cors_report(&outcome).max_age,
            max_age.and_then(|v| v.parse().ok())
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn expose_headers_must_list_each_wanted_header() {
    let server = app_only(
        &valid_leaf(),
        &[
            ("Access-Control-Allow-Methods", "PUT"),
            ("Access-Control-Expose-Headers", "x-amz-request-id"),
        ],
    );
    let outcome = probe_cors(
        &server.url(OBJECT),
        r#"expose_headers = ["etag", "x-amz-request-id"]"#,
    )
    .await;
    assert_failures(&outcome, &["cors.expose_headers"]);
    let f = crate::common::env::failure(&outcome, "cors.expose_headers");
    assert!(f.message.contains("etag"), "{}", pretty(&outcome));
    assert_eq!(cors_report(&outcome).expose_headers, ["x-amz-request-id"]);

    // Case-insensitive, as S3 spells it.
    let server = app_only(
        &valid_leaf(),
        &[
            ("Access-Control-Allow-Methods", "PUT"),
            ("Access-Control-Expose-Headers", "ETag, x-amz-request-id"),
        ],
    );
    let outcome = probe_cors(
        &server.url(OBJECT),
        r#"expose_headers = ["etag", "x-amz-request-id"]"#,
    )
    .await;
    assert_failures(&outcome, &[]);
}

// ----------------------------------------------------------- deny origins

#[tokio::test(flavor = "multi_thread")]
async fn deny_origin_echoed_back_fails_denied_origin() {
    // A bucket that reflects any Origin: the classic misconfiguration.
    let server = scripted(&valid_leaf(), |req| {
        let origin = origin_of(req);
        answer(
            200,
            &[
                ("Access-Control-Allow-Origin", origin.as_str()),
                ("Access-Control-Allow-Methods", "PUT"),
            ],
        )
    });
    let outcome = probe_cors(
        &server.url(OBJECT),
        r#"deny_origins = ["https://evil.example", "https://attacker.example.net"]"#,
    )
    .await;
    assert_failures(&outcome, &["cors.denied_origin", "cors.denied_origin"]);
    let report = cors_report(&outcome);
    for (d, origin) in report.denied.iter().zip([EVIL, EVIL2]) {
        assert_eq!(d.origin, origin);
        assert!(d.admitted);
        assert_eq!(d.allow_origin.as_deref(), Some(origin));
    }
    assert!(
        outcome.failures[0].message.contains(EVIL),
        "{}",
        pretty(&outcome)
    );
    assert!(
        outcome.failures[1].message.contains(EVIL2),
        "{}",
        pretty(&outcome)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn deny_origin_admitted_by_star_fails_denied_origin() {
    let server = fixed(
        &valid_leaf(),
        200,
        &[
            ("Access-Control-Allow-Origin", "*"),
            ("Access-Control-Allow-Methods", "PUT"),
        ],
    );
    let outcome = probe_cors(
        &server.url(OBJECT),
        "allow_any_origin = true\ndeny_origins = [\"https://evil.example\"]",
    )
    .await;
    assert_failures(&outcome, &["cors.denied_origin"]);
    let d = &cors_report(&outcome).denied[0];
    assert!(d.admitted);
    assert_eq!(d.allow_origin.as_deref(), Some("*"));
}

#[tokio::test(flavor = "multi_thread")]
async fn deny_origin_with_2xx_but_other_allow_origin_is_not_admitted() {
    // Some servers answer every preflight 200 and put the app's origin in
    // Access-Control-Allow-Origin whoever asks: the browser on the foreign
    // origin is refused all the same.
    let server = fixed(
        &valid_leaf(),
        200,
        &[
            ("Access-Control-Allow-Origin", APP),
            ("Access-Control-Allow-Methods", "PUT"),
        ],
    );
    let outcome = probe_cors(
        &server.url(OBJECT),
        r#"deny_origins = ["https://evil.example"]"#,
    )
    .await;
    assert_failures(&outcome, &[]);
    let d = &cors_report(&outcome).denied[0];
    assert!(!d.admitted);
    assert_eq!(d.allow_origin.as_deref(), Some(APP));
}

#[tokio::test(flavor = "multi_thread")]
async fn deny_origin_echoed_with_a_non_2xx_is_not_admitted() {
    let server = scripted(&valid_leaf(), |req| {
        let origin = origin_of(req);
        let status = if origin == APP { 200 } else { 403 };
        answer(
            status,
            &[
                ("Access-Control-Allow-Origin", origin.as_str()),
                ("Access-Control-Allow-Methods", "PUT"),
            ],
        )
    });
    let outcome = probe_cors(
        &server.url(OBJECT),
        r#"deny_origins = ["https://evil.example"]"#,
    )
    .await;
    assert_failures(&outcome, &[]);
    assert!(!cors_report(&outcome).denied[0].admitted);
}

// ---------------------------------------------------------------- TLS

#[tokio::test(flavor = "multi_thread")]
async fn tls_assertions_apply_to_the_bucket_url() {
    let server = app_only(&expired_leaf(), &[("Access-Control-Allow-Methods", "PUT")]);
    let outcome = probe_cors(&server.url(OBJECT), "").await;
    assert_eq!(outcome.status, Status::Down);
    let names = assertion_names(&outcome);
    assert!(names.contains(&"tls.expiry"), "{}", pretty(&outcome));
    assert!(
        !names.iter().any(|n| n.starts_with("cors.")),
        "{}",
        pretty(&outcome)
    );
    let tls = outcome.tls.as_ref().expect("tls report");
    assert!(!tls.trusted);
    assert_eq!(tls.chain.len(), 2);

    // A renewal that looks stuck (20 of 90 days left) warns, the CORS
    // answer being fine.
    let server = app_only(
        &twenty_days_left_leaf(),
        &[("Access-Control-Allow-Methods", "PUT")],
    );
    let outcome = probe_cors(&server.url(OBJECT), "").await;
    assert_eq!(
        assertion_names(&outcome),
        ["tls.renewal_overdue"],
        "{}",
        pretty(&outcome)
    );
    assert_eq!(outcome.status, Status::Warn, "{}", pretty(&outcome));
    assert_eq!(cors_report(&outcome).allow_origin.as_deref(), Some(APP));
}
