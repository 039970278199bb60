//! Reading the value of an `issue`/`issuewild` CAA record: the issuer
//! domain name and its parameters, by RFC 8659 section 4.2's grammar
//! (whitespace allowed around names, `;` and `=`), and RFC 8657's two
//! parameters, `accounturi` and `validationmethods`.
//!
//! The value is read as the outcome records it (the text shown in JSON
//! and kept in the history), not as the resolver library parsed it, so
//! that a stored outcome is judged the same way as a fresh one. What the
//! parameters mean for issuance is `caa`'s to say.

use crate::check::is_validation_method as is_method;

/// An issue value that follows the grammar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueValue {
    /// `None` for `";"`: no CA may issue.
    pub issuer: Option<String>,
    /// `(tag lower-cased, value)`, in the record's order.
    pub parameters: Vec<(String, String)>,
}

impl IssueValue {
    /// Reads `value`, or says what does not follow the grammar.
    pub fn parse(value: &str) -> Result<IssueValue, String> {
        let (issuer, rest) = match value.split_once(';') {
            Some((issuer, rest)) => (issuer, Some(rest)),
            None => (value, None),
        };
        let issuer = wsp_trim(issuer);
        if !issuer.is_empty() && !is_domain_name(issuer.trim_end_matches('.')) {
            return Err(format!("{issuer:?} is not an issuer domain name"));
        }
        let mut parameters = Vec::new();
        let rest = rest.map(wsp_trim).unwrap_or_default();
        // Tags and values cannot hold `;`, so splitting on it is exact.
        for parameter in rest.split(';').filter(|_| !rest.is_empty()) {
            if wsp_trim(parameter).is_empty() {
                return Err("a ';' with no parameter after it".to_string());
            }
            let Some((tag, value)) = parameter.split_once('=') else {
                return Err(format!(
                    "parameter {:?} is not tag=value",
                    wsp_trim(parameter)
                ));
            };
            let (tag, value) = (wsp_trim(tag), wsp_trim(value));
            if !is_label(tag) {
                return Err(format!(
                    "parameter tag {tag:?} is not letters, digits and '-'"
                ));
            }
            if let Some(bad) = value.chars().find(|c| !c.is_ascii_graphic() || *c == ';') {
                return Err(format!(
                    "parameter {tag} holds {bad:?}, which a value cannot"
                ));
            }
            let tag = tag.to_ascii_lowercase();
            // Which of two a CA would heed is not defined: the record is
            // read as authorising nothing, so that the zone gets fixed.
            if parameters.iter().any(|(t, _)| *t == tag) {
                return Err(format!("parameter {tag} appears twice"));
            }
            parameters.push((tag, value.to_string()));
        }
        let value = IssueValue {
            issuer: (!issuer.is_empty()).then(|| issuer.to_string()),
            parameters,
        };
        if let Some(list) = value.parameter("validationmethods") {
            if !list.is_empty() && !list.split(',').all(is_method) {
                return Err(format!(
                    "validationmethods={list} is not a comma-separated list of method names"
                ));
            }
        }
        Ok(value)
    }

    /// RFC 8657 section 3: the one account this record lets the CA accept.
    pub fn accounturi(&self) -> Option<&str> {
        self.parameter("accounturi")
    }

    /// RFC 8657 section 4: the validation methods this record allows;
    /// `None`: every method.
    pub fn validationmethods(&self) -> Option<Vec<String>> {
        let list = self.parameter("validationmethods")?;
        Some(
            list.split(',')
                .filter(|m| !m.is_empty())
                .map(str::to_string)
                .collect(),
        )
    }

    fn parameter(&self, tag: &str) -> Option<&str> {
        self.parameters
            .iter()
            .find(|(t, _)| t == tag)
            .map(|(_, v)| v.as_str())
    }
}

/// RFC 5234 WSP: space and tab, nothing else.
fn wsp_trim(text: &str) -> &str {
    text.trim_matches([' ', '\t'])
}

/// `(ALPHA / DIGIT) *( *("-") (ALPHA / DIGIT))`: a domain label, and
/// also a parameter tag.
fn is_label(text: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    alnum(text.chars().next())
        && alnum(text.chars().last())
        && text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

fn is_domain_name(text: &str) -> bool {
    text.split('.').all(is_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(value: &str) -> Vec<(String, String)> {
        IssueValue::parse(value).unwrap().parameters
    }

    #[test]
    fn an_issuer_alone_has_no_parameters() {
        let value = IssueValue::parse("letsencrypt.org").unwrap();
        assert_eq!(value.issuer.as_deref(), Some("letsencrypt.org"));
        assert!(value.parameters.is_empty());
        assert_eq!(value.accounturi(), None);
        assert_eq!(value.validationmethods(), None);
    }

    #[test]
    fn whitespace_is_allowed_around_names_semicolons_and_equals() {
        let value = IssueValue::parse(
            " letsencrypt.org ;\taccounturi = https://acme.example/acct/1 ;  validationmethods=dns-01,http-01 ",
        )
        .unwrap();
        assert_eq!(value.issuer.as_deref(), Some("letsencrypt.org"));
        assert_eq!(value.accounturi(), Some("https://acme.example/acct/1"));
        assert_eq!(
            value.validationmethods(),
            Some(vec!["dns-01".to_string(), "http-01".to_string()])
        );
    }

    #[test]
    fn an_empty_issuer_may_still_carry_parameters() {
        assert_eq!(IssueValue::parse(";").unwrap().issuer, None);
        assert_eq!(IssueValue::parse("").unwrap().issuer, None);
        assert_eq!(
            params("; accounturi=x"),
            [("accounturi".into(), "x".into())]
        );
        assert_eq!(params("letsencrypt.org;"), []);
    }

    #[test]
    fn tags_are_read_in_lower_case_values_as_written() {
        assert_eq!(
            params("ca.example; AccountURI=https://ca.example/Acct/1"),
            [("accounturi".into(), "https://ca.example/Acct/1".into())]
        );
    }

    #[test]
    fn an_empty_method_list_allows_no_method() {
        let value = IssueValue::parse("ca.example; validationmethods=").unwrap();
        assert_eq!(value.validationmethods(), Some(Vec::new()));
    }

    #[test]
    fn values_outside_the_grammar_say_what_is_wrong() {
        let cases = [
            (
                "ca.example; accounturi",
                "parameter \"accounturi\" is not tag=value",
            ),
            ("ca.example; a=b;", "a ';' with no parameter after it"),
            (
                "ca.example; -x=1",
                "parameter tag \"-x\" is not letters, digits and '-'",
            ),
            (
                "ca.example; accounturi=a b",
                "parameter accounturi holds ' ', which a value cannot",
            ),
            ("ca example", "\"ca example\" is not an issuer domain name"),
            (
                "ca.example; accounturi=a; accounturi=b",
                "parameter accounturi appears twice",
            ),
            (
                "ca.example; validationmethods=dns-01,,http-01",
                "validationmethods=dns-01,,http-01 is not a comma-separated list of method names",
            ),
            (
                "ca.example; validationmethods=dns_01",
                "validationmethods=dns_01 is not a comma-separated list of method names",
            ),
        ];
        for (value, problem) in cases {
            assert_eq!(
                IssueValue::parse(value),
                Err(problem.to_string()),
                "{value}"
            );
        }
    }
}
