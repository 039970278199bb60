//! What a browser sends and compares, as the `cors` and `upload` checks
//! name it: origins (serialized as a browser does) and header names
//! (lower-cased, as in `Access-Control-Request-Headers`).

use std::str::FromStr;

use http::HeaderName;
use toml::Spanned;

use super::cx::Cx;

/// An origin as a browser serializes it: scheme, host, non-default port;
/// no path, query or userinfo.
pub(super) fn parse_origin(cx: &mut Cx<'_>, key: &str, value: &Spanned<String>) -> Option<String> {
    let url = cx.web_url(key, value)?;
    let has_extra = !matches!(url.path(), "" | "/")
        || url.query().is_some()
        || url.fragment().is_some()
        || !url.username().is_empty()
        || url.password().is_some();
    if has_extra {
        let message = format!(
            "{:?} is not an origin: write only scheme, host and port, e.g. \"https://app.example.com\"",
            value.get_ref()
        );
        cx.error(&value.span(), key, message);
        return None;
    }
    Some(url.origin().ascii_serialization())
}

/// Header names, validated and lower-cased (browsers lower-case them in
/// `Access-Control-Request-Headers`).
pub(super) fn header_names(
    cx: &mut Cx<'_>,
    key: &str,
    values: Option<&[Spanned<String>]>,
) -> Vec<String> {
    let mut names = Vec::new();
    for (i, name) in values.into_iter().flatten().enumerate() {
        match HeaderName::from_str(name.get_ref()) {
            Ok(header) => names.push(header.as_str().to_string()),
            Err(_) => {
                let message = format!("{:?} is not a valid HTTP header name", name.get_ref());
                cx.error(&name.span(), &format!("{key}[{i}]"), message);
            }
        }
    }
    names
}
