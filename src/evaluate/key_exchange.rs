//! `[check.tls] require_pq`: the handshake must have negotiated a
//! post-quantum hybrid key exchange (X25519MLKEM768 and its kin), which
//! protects today's traffic from being recorded now and decrypted once a
//! quantum computer exists. vigie offers the hybrid first, as browsers do,
//! so a server that supports it picks it.

use crate::check::TlsExpect;
use crate::outcome::{Assertion, Failure, TlsReport};

/// Adds `tls.pq` when it is required and not negotiated. A handshake that
/// did not complete negotiated nothing: its own failure says why, and a
/// second one would only repeat it.
pub(super) fn judge(expect: &TlsExpect, tls: &TlsReport, out: &mut Vec<Failure>) {
    if !expect.require_pq || tls.post_quantum() {
        return;
    }
    let Some(group) = &tls.key_exchange else {
        return;
    };
    out.push(Failure {
        assertion: Assertion::TlsPq,
        expected: "a post-quantum hybrid key exchange (X25519MLKEM768)".to_string(),
        observed: group.clone(),
        message: format!(
            "the server negotiated {group}, not a post-quantum hybrid: enable X25519MLKEM768 \
             in its TLS settings (OpenSSL 3.5+, Go 1.24+, rustls 0.23 offer it)"
        ),
    });
}
