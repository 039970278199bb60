//! Probes: I/O only. One module per check kind, dispatched by [`CheckKind`];
//! each returns facts in an [`Outcome`] and judges nothing (see
//! `evaluate`), except that the upload probe asks `evaluate::upload`
//! whether a browser would go on after each step. The per-check `timeout`
//! bounds everything a probe does, the CA lookups after it included (they
//! get what the exchange left of it), and when it fires the outcome says
//! how far the probe had got.

pub mod address;
pub mod ari;
pub mod budget;
pub mod ca;
pub mod cache;
pub mod chains;
pub mod client;
pub mod cors;
pub mod crl;
pub mod dns;
pub mod domain;
pub mod http;
pub mod shown;
pub mod smtp;
pub mod tls;
pub mod tls_port;
pub mod upload;

use std::sync::Arc;

use crate::check::{Check, CheckKind};
use crate::outcome::{
    Assertion, CorsReport, DnsReport, DomainReport, HttpReport, Outcome, ProbeError, Status,
    UploadReport,
};
use crate::redact::redact;
use client::{Client, Trace};

/// Runs probes; cheap to share between tasks.
#[derive(Debug, Clone)]
pub struct Prober {
    client: Arc<Client>,
    /// ARI windows and CRLs, shared by every check.
    authority: Arc<ca::Authority>,
    /// The RDAP bootstrap and the registries' last answers.
    rdap: Arc<domain::Rdap>,
}

enum Facts {
    Http(HttpReport),
    Cors(CorsReport),
    Dns(DnsReport),
    Upload(UploadReport),
    Domain(DomainReport),
    /// The kinds whose facts are all in the trace (`tls`, `smtp`).
    Traced,
}

impl Prober {
    /// A prober whose ARI and CRL caches hold `ca_cache_size` bytes.
    pub fn new(client: Client, ca_cache_size: usize) -> Self {
        Self {
            client: Arc::new(client),
            authority: Arc::new(ca::Authority::new(ca_cache_size)),
            rdap: Arc::new(domain::Rdap::default()),
        }
    }

    /// The same prober, asking registries as `rdap` says (its bootstrap,
    /// where it keeps their answers).
    pub fn with_rdap(mut self, rdap: domain::Rdap) -> Self {
        self.rdap = Arc::new(rdap);
        self
    }

    /// The shared ARI and CRL caches (their fetch counters).
    pub fn authority(&self) -> &ca::Authority {
        &self.authority
    }

    /// Probes once. Never fails: a target that cannot be reached is an
    /// outcome with a `probe_error`, not an `Err`.
    pub async fn probe(&self, check: &Check) -> Outcome {
        let started_at = self.client.clock().now();
        let started = tokio::time::Instant::now();
        let mut trace = Trace {
            started_at: Some(started_at),
            ..Trace::default()
        };
        let result = tokio::time::timeout(check.timeout, self.dispatch(check, &mut trace)).await;
        let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
        let facts = match result {
            Ok(facts) => facts,
            Err(_elapsed) => Err(ProbeError {
                kind: Assertion::Timeout,
                message: format!(
                    "no answer within {} ({})",
                    crate::when::std_span(check.timeout),
                    trace.phase
                ),
            }),
        };
        // What the CA says, after the exchange, in what is left of the
        // check's timeout (see `ca`): the chain is known once the handshake
        // is done.
        if let Some(tls) = trace.tls.as_mut() {
            let trust = self.client.trust_for(check);
            let budget = budget::Budget::until(started + check.timeout);
            self.authority
                .inspect(
                    &self.client,
                    check,
                    &trust,
                    &trace.served,
                    trace.first_peer,
                    &budget,
                    tls,
                )
                .await;
        }
        let (mut http, mut cors, mut dns, mut upload, mut domain) = (None, None, None, None, None);
        let smtp = trace.smtp.take().map(Box::new);
        let mut probe_error = None;
        match facts {
            Ok(Facts::Http(report)) => http = Some(report),
            Ok(Facts::Cors(report)) => cors = Some(Box::new(report)),
            Ok(Facts::Dns(report)) => dns = Some(Box::new(report)),
            Ok(Facts::Upload(report)) => upload = Some(Box::new(report)),
            Ok(Facts::Domain(report)) => domain = Some(Box::new(report)),
            Ok(Facts::Traced) => {}
            Err(err) => probe_error = Some(bounded(err)),
        }
        Outcome {
            name: check.name.clone(),
            kind: check.kind_name(),
            target: redact(&check.url),
            status: Status::Up,
            started_at,
            duration_ms,
            failures: Vec::new(),
            probe_error,
            http,
            tls: trace.tls,
            cors,
            dns,
            upload,
            smtp,
            domain,
        }
    }

    async fn dispatch(&self, check: &Check, trace: &mut Trace) -> Result<Facts, ProbeError> {
        let trust = self.client.trust_for(check);
        match &check.kind {
            CheckKind::Http(http) => http::probe(&self.client, check, http, &trust, trace)
                .await
                .map(Facts::Http),
            CheckKind::Cors(cors) => cors::probe(&self.client, check, cors, &trust, trace)
                .await
                .map(Facts::Cors),
            CheckKind::Dns(dns) => dns::probe(check, dns).await.map(Facts::Dns),
            CheckKind::Upload(upload) => upload::probe(&self.client, check, upload, &trust, trace)
                .await
                .map(Facts::Upload),
            CheckKind::Tls(port) => tls_port::probe(&self.client, check, port, &trust, trace)
                .await
                .map(|()| Facts::Traced),
            CheckKind::Smtp(smtp) => smtp::probe(&self.client, check, smtp, &trust, trace)
                .await
                .map(|()| Facts::Traced),
            // Never an error: a registry that cannot be read is unknown,
            // which the report says (`evaluate::domain`).
            CheckKind::Domain(domain) => Ok(Facts::Domain(
                self.rdap.probe(&self.client, check, domain, &trust).await,
            )),
        }
    }
}

/// The probe's error message, escaped and capped as one sentence. Each
/// target value in it was sanitised where it was quoted; this is the
/// backstop for text no probe module wrote (hyper's and rustls's errors).
fn bounded(err: ProbeError) -> ProbeError {
    ProbeError {
        message: crate::sanitize::message(&err.message),
        ..err
    }
}
