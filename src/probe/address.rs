//! Which addresses a redirect may lead a probe to.
//!
//! A monitored site chooses where its redirects point. Followed blindly, a
//! `Location: http://169.254.169.254/latest/meta-data/` or one naming a
//! host inside vigie's own network makes vigie fetch there and report the
//! answer as the site's. The policy, applied to every address a redirect
//! hop would connect to (after resolution, so a name that resolves to a
//! private address is caught too):
//!
//! - a cloud metadata address is never a redirect's destination;
//! - any other non-global address (loopback, RFC 1918, ULA, link-local,
//!   CGNAT, documentation, multicast, ...) is one only when the check opts
//!   in (`redirect_to_private = true`) or its own target is itself such an
//!   address (a check of an internal service redirects internally).
//!
//! The first request goes where the operator configured: the policy is
//! about where the *target* sends vigie.

use std::net::IpAddr;

pub use crate::address::{classify, AddressClass};

/// Where a redirect may go, for one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedirectPolicy {
    /// Non-global addresses are allowed (the check opted in, or its own
    /// target is one). Metadata addresses never are.
    pub allow_non_global: bool,
}

impl RedirectPolicy {
    /// `None` if a redirect may connect to `ip`, of kind `class`, else why
    /// not, in the operator's words.
    pub fn refusal(&self, ip: IpAddr, class: AddressClass) -> Option<String> {
        match class {
            AddressClass::Global => None,
            AddressClass::Metadata => Some(format!(
                "{ip} is a cloud instance metadata address, never followed"
            )),
            AddressClass::NonGlobal(_) if self.allow_non_global => None,
            AddressClass::NonGlobal(range) => Some(format!(
                "{ip} is a {range} address; set redirect_to_private = true on the check to follow it"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_refuses_metadata_even_when_private_is_allowed() {
        let strict = RedirectPolicy {
            allow_non_global: false,
        };
        let open = RedirectPolicy {
            allow_non_global: true,
        };
        let metadata: IpAddr = "169.254.169.254".parse().unwrap();
        let private: IpAddr = "10.0.0.5".parse().unwrap();
        let global: IpAddr = "8.8.8.8".parse().unwrap();
        let refusal = |policy: RedirectPolicy, ip| policy.refusal(ip, classify(ip));
        assert_eq!(
            refusal(open, metadata).as_deref(),
            Some("169.254.169.254 is a cloud instance metadata address, never followed")
        );
        assert_eq!(
            refusal(strict, private).as_deref(),
            Some("10.0.0.5 is a private (RFC 1918) address; set redirect_to_private = true on the check to follow it")
        );
        assert_eq!(refusal(open, private), None);
        assert_eq!(refusal(strict, global), None);
    }
}
