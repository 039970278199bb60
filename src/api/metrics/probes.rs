//! The per-check families: blackbox_exporter's names first, labelled by
//! check so one scrape covers every target, then vigie's own per-check
//! status and last run. Written one family at a time, as the text format
//! wants every sample of a family together.

use std::sync::Arc;

use crate::metrics::{flag, Exposition, Family};
use crate::outcome::{Outcome, Status};

#[derive(Debug, Clone, Copy)]
pub(super) enum ProbeFamily {
    Success,
    Duration,
    HttpStatus,
    EarliestExpiry,
    ChainInfo,
    TlsVersion,
    CheckStatus,
    LastRun,
}

const SUCCESS: Family = Family::gauge(
    "probe_success",
    "1 when the last probe was up or warn, 0 when down",
);
const DURATION: Family = Family::gauge("probe_duration_seconds", "how long the last probe took");
const HTTP_STATUS: Family = Family::gauge(
    "probe_http_status_code",
    "HTTP status of the last answer (cors: of the preflight)",
);
const EARLIEST_EXPIRY: Family = Family::gauge(
    "probe_ssl_earliest_cert_expiry",
    "not_after of the earliest-expiring certificate served, unix seconds",
);
const CHAIN_INFO: Family = Family::gauge(
    "probe_ssl_last_chain_info",
    "the leaf certificate served, as labels",
);
const TLS_VERSION: Family = Family::gauge(
    "probe_tls_version_info",
    "TLS version negotiated, as a label",
);
const CHECK_STATUS: Family = Family::gauge(
    "vigie_check_status",
    "1 for the status of the last probe (up, warn, down)",
);
const LAST_RUN: Family = Family::gauge(
    "vigie_check_last_run_timestamp_seconds",
    "when the last probe started",
);

impl ProbeFamily {
    pub(super) const ALL: [ProbeFamily; 8] = [
        Self::Success,
        Self::Duration,
        Self::HttpStatus,
        Self::EarliestExpiry,
        Self::ChainInfo,
        Self::TlsVersion,
        Self::CheckStatus,
        Self::LastRun,
    ];

    fn family(self) -> &'static Family {
        match self {
            Self::Success => &SUCCESS,
            Self::Duration => &DURATION,
            Self::HttpStatus => &HTTP_STATUS,
            Self::EarliestExpiry => &EARLIEST_EXPIRY,
            Self::ChainInfo => &CHAIN_INFO,
            Self::TlsVersion => &TLS_VERSION,
            Self::CheckStatus => &CHECK_STATUS,
            Self::LastRun => &LAST_RUN,
        }
    }

    /// This family's samples for `outcomes`, after its HELP and TYPE when
    /// `first` (the body is written in chunks of checks).
    pub(super) fn write(self, out: &mut String, outcomes: &[Arc<Outcome>], first: bool) {
        let mut m = Exposition::new(out);
        if first {
            m.family(self.family());
        }
        for outcome in outcomes {
            self.write_sample(&mut m, outcome);
        }
    }

    fn write_sample(self, m: &mut Exposition, o: &Outcome) {
        let family = self.family();
        let check = ("check", o.name.as_str());
        let kind = ("kind", o.kind.as_str());
        let target = ("target", o.target.as_str());
        match self {
            Self::Success => m.sample(
                family,
                &[check, kind, target],
                flag(o.status != Status::Down),
            ),
            Self::Duration => m.sample(family, &[check, kind, target], o.duration_ms / 1000.0),
            Self::HttpStatus => {
                let status = o
                    .http
                    .as_ref()
                    .map(|h| h.status)
                    .or(o.cors.as_ref().map(|c| c.preflight_status));
                if let Some(status) = status {
                    m.sample(family, &[check, kind, target], f64::from(status));
                }
            }
            Self::EarliestExpiry => {
                let chain = o.tls.as_ref().map(|t| &t.chain[..]).unwrap_or_default();
                if let Some(first) = crate::cert::earliest_expiry(chain) {
                    let expiry = first.not_after.unix_timestamp() as f64;
                    m.sample(family, &[check, kind, target], expiry);
                }
            }
            Self::ChainInfo => {
                if let Some(leaf) = o.leaf() {
                    let labels = [
                        check,
                        kind,
                        target,
                        ("fingerprint_sha256", leaf.sha256.as_str()),
                        ("issuer", leaf.issuer.as_str()),
                        ("serial_number", leaf.serial.as_str()),
                        ("subject", leaf.subject.as_str()),
                    ];
                    m.sample(family, &labels, 1.0);
                }
            }
            Self::TlsVersion => {
                if let Some(version) = o.tls.as_ref().and_then(|t| t.version.as_deref()) {
                    m.sample(family, &[check, kind, target, ("version", version)], 1.0);
                }
            }
            Self::CheckStatus => {
                for (status, label) in [
                    (Status::Up, "up"),
                    (Status::Warn, "warn"),
                    (Status::Down, "down"),
                ] {
                    m.sample(
                        family,
                        &[check, ("status", label)],
                        flag(o.status == status),
                    );
                }
            }
            Self::LastRun => m.sample(family, &[check], o.started_at.unix_timestamp() as f64),
        }
    }
}
