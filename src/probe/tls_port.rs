//! `kind = "tls"`: a TLS handshake on any port (IMAPS, a database, an MQTT
//! broker), and nothing else: no application protocol is spoken, so any
//! TLS server answers the same way. The handshake's facts land in the
//! trace exactly as an https hop's, and `evaluate` judges the chain as it
//! judges https.

use super::client::{Client, Trace};
use super::tls::Trust;
use crate::check::{Check, TlsPortCheck};
use crate::outcome::ProbeError;

/// Connects, shakes hands, and hangs up. The connection is dropped without
/// a close_notify: nothing was exchanged that a clean close would confirm.
pub async fn probe(
    client: &Client,
    check: &Check,
    port: &TlsPortCheck,
    trust: &Trust,
    trace: &mut Trace,
) -> Result<(), ProbeError> {
    let tcp = client
        .open(&port.host, port.port, check.resolve, trace)
        .await?;
    client
        .secure(tcp, &port.server_name, trust, trace)
        .await
        .map(drop)
}
