//! An RDAP domain object (RFC 9083 §5.3) read for what vigie judges: the
//! `expiration` and `last changed` events, the registrar (the entity with
//! the `registrar` role, named by its vCard `fn`), and the `status` array.
//! Everything else in the answer (nameservers, notices, links, remarks) is
//! skipped unread.
//!
//! The answer comes from a registry vigie does not control: it is read
//! only after the body was capped (`BODY_CAP`, 1 MiB), serde_json bounds
//! its nesting, and every text kept is sanitised here, where it is read.
//! What the registry got wrong is an error naming what was wrong, never a
//! panic and never a guess: a date that is not RFC 3339 is left out, not
//! read some other way.

use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// What a registry says about one domain's registration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registration {
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub expires_at: Option<OffsetDateTime>,
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub last_changed: Option<OffsetDateTime>,
    #[serde(default)]
    pub registrar: Option<String>,
    /// As the registry spells them, sanitised, at most
    /// [`crate::sanitize::LIST_CAP`].
    #[serde(default)]
    pub statuses: Vec<String>,
}

#[derive(Deserialize)]
struct Domain {
    #[serde(rename = "objectClassName")]
    object_class_name: Option<String>,
    #[serde(rename = "errorCode")]
    error_code: Option<serde_json::Value>,
    #[serde(default)]
    status: Vec<String>,
    #[serde(default)]
    events: Vec<Event>,
    #[serde(default)]
    entities: Vec<Entity>,
}

#[derive(Deserialize)]
struct Event {
    #[serde(rename = "eventAction")]
    action: String,
    #[serde(rename = "eventDate")]
    date: Option<String>,
}

#[derive(Deserialize)]
struct Entity {
    #[serde(default)]
    roles: Vec<String>,
    handle: Option<String>,
    /// jCard (RFC 7095): `["vcard", [[name, params, type, value], ...]]`.
    #[serde(rename = "vcardArray")]
    vcard: Option<serde_json::Value>,
}

/// Reads an RDAP domain answer (the body of a 200).
pub fn parse(body: &[u8]) -> Result<Registration, String> {
    let domain: Domain =
        serde_json::from_slice(body).map_err(|err| format!("not an RDAP domain object ({err})"))?;
    if domain.error_code.is_some() {
        return Err("the RDAP server answered with an error object".to_string());
    }
    match domain.object_class_name.as_deref() {
        Some("domain") => {}
        Some(other) => {
            return Err(format!(
                "not an RDAP domain object (objectClassName {:?})",
                crate::sanitize::value(other)
            ))
        }
        None => return Err("not an RDAP domain object (no objectClassName)".to_string()),
    }
    Ok(Registration {
        expires_at: event(&domain.events, "expiration"),
        last_changed: event(&domain.events, "last changed"),
        registrar: domain
            .entities
            .iter()
            .find(|e| e.roles.iter().any(|r| r.eq_ignore_ascii_case("registrar")))
            .and_then(|e| vcard_name(e).or_else(|| e.handle.clone()))
            .map(|name| crate::sanitize::value(name.trim())),
        statuses: crate::sanitize::list(&domain.status),
    })
}

/// The date of the first event named `action` (RFC 9083 §4.5; the names
/// are those of the IANA "RDAP JSON Values" registry), when it is RFC 3339.
fn event(events: &[Event], action: &str) -> Option<OffsetDateTime> {
    events
        .iter()
        .find(|e| e.action.eq_ignore_ascii_case(action))
        .and_then(|e| e.date.as_deref())
        .and_then(|date| OffsetDateTime::parse(date.trim(), &Rfc3339).ok())
}

/// The `fn` (formatted name) property of an entity's jCard.
fn vcard_name(entity: &Entity) -> Option<String> {
    let properties = entity.vcard.as_ref()?.get(1)?.as_array()?;
    properties
        .iter()
        .filter_map(|p| p.as_array())
        .find(|p| p.first().and_then(|n| n.as_str()) == Some("fn"))
        .and_then(|p| p.get(3)?.as_str())
        .filter(|name| !name.trim().is_empty())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    /// Shaped as Verisign answers for a .com name.
    const VERISIGN: &str = r#"{
      "objectClassName": "domain",
      "handle": "2336799_DOMAIN_COM-VRSN",
      "ldhName": "EXAMPLE.COM",
      "links": [{"value": "https://rdap.verisign.com/com/v1/domain/EXAMPLE.COM",
                 "rel": "self", "href": "https://rdap.verisign.com/com/v1/domain/EXAMPLE.COM",
                 "type": "application/rdap+json"}],
      "status": ["client delete prohibited", "client transfer prohibited",
                 "client update prohibited"],
      "entities": [{"objectClassName": "entity", "handle": "376", "roles": ["registrar"],
                    "publicIds": [{"type": "IANA Registrar ID", "identifier": "376"}],
                    "vcardArray": ["vcard", [["version", {}, "text", "4.0"],
                                             ["fn", {}, "text", "RESERVED-Internet Assigned Numbers Authority"]]],
                    "entities": [{"objectClassName": "entity", "roles": ["abuse"],
                                  "vcardArray": ["vcard", [["version", {}, "text", "4.0"],
                                                           ["fn", {}, "text", ""]]]}]}],
      "events": [{"eventAction": "registration", "eventDate": "1995-08-14T04:00:00Z"},
                 {"eventAction": "expiration", "eventDate": "2026-08-13T04:00:00Z"},
                 {"eventAction": "last changed", "eventDate": "2025-08-14T07:01:34Z"},
                 {"eventAction": "last update of RDAP database", "eventDate": "2026-12-07T10:12:44Z"}],
      "secureDNS": {"delegationSigned": true},
      "nameservers": [{"objectClassName": "nameserver", "ldhName": "A.IANA-SERVERS.NET"}],
      "rdapConformance": ["rdap_level_0", "icann_rdap_technical_implementation_guide_1"],
      "notices": [{"title": "Terms of Use", "description": ["Service subject to Terms of Use."]}]
    }"#;

    #[test]
    fn a_registry_answer_gives_expiry_last_change_registrar_and_statuses() {
        let got = parse(VERISIGN.as_bytes()).unwrap();
        assert_eq!(got.expires_at, Some(datetime!(2026-08-13 04:00:00 UTC)));
        assert_eq!(got.last_changed, Some(datetime!(2025-08-14 07:01:34 UTC)));
        assert_eq!(
            got.registrar.as_deref(),
            Some("RESERVED-Internet Assigned Numbers Authority")
        );
        assert_eq!(
            got.statuses,
            [
                "client delete prohibited",
                "client transfer prohibited",
                "client update prohibited"
            ]
        );
    }

    #[test]
    fn what_a_registry_leaves_out_stays_unknown() {
        // .fr-like: no expiration event, the registrar named by handle only.
        let body = br#"{"objectClassName": "domain", "ldhName": "example.fr",
            "status": ["active"],
            "entities": [{"objectClassName": "entity", "handle": "EXAMPLE-REGISTRAR",
                          "roles": ["registrar"]}],
            "events": [{"eventAction": "last changed", "eventDate": "2026-03-01T10:00:00.123456Z"}]}"#;
        let got = parse(body).unwrap();
        assert_eq!(got.expires_at, None);
        assert_eq!(
            got.last_changed,
            Some(datetime!(2026-03-01 10:00:00.123456 UTC))
        );
        assert_eq!(got.registrar.as_deref(), Some("EXAMPLE-REGISTRAR"));
        // A date that is not RFC 3339 is left out, not guessed at.
        let body = br#"{"objectClassName": "domain",
            "events": [{"eventAction": "expiration", "eventDate": "13/08/2026"}]}"#;
        assert_eq!(parse(body).unwrap().expires_at, None);
    }

    #[test]
    fn what_is_not_a_domain_object_is_refused_with_its_reason() {
        let error = br#"{"errorCode": 404, "title": "Not Found", "description": ["gone"]}"#;
        assert!(parse(error).unwrap_err().contains("error object"));
        let entity = br#"{"objectClassName": "entity", "handle": "X"}"#;
        assert!(parse(entity)
            .unwrap_err()
            .contains("objectClassName \"entity\""));
        assert!(parse(b"<html>busy</html>")
            .unwrap_err()
            .starts_with("not an RDAP domain object"));
        let wrong_type = br#"{"objectClassName": "domain", "status": [1, 2]}"#;
        assert!(parse(wrong_type).is_err());
    }

    #[test]
    fn registry_text_is_sanitised_where_it_is_read() {
        let long = "x".repeat(10_000);
        let body = format!(
            r#"{{"objectClassName": "domain", "status": ["client hold", "\u001b[31mred"],
                "entities": [{{"roles": ["registrar"],
                  "vcardArray": ["vcard", [["fn", {{}}, "text", "{long}"]]]}}]}}"#
        );
        let got = parse(body.as_bytes()).unwrap();
        assert_eq!(got.statuses[0], "client hold");
        assert_eq!(got.statuses[1], "\\x1b[31mred");
        assert!(got.registrar.unwrap().len() <= crate::sanitize::VALUE_CAP);
    }
}
