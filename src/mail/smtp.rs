//! One SMTP session to the configured relay, and what each failure means.
//!
//! lettre speaks the protocol (EHLO, AUTH, MAIL/RCPT/DATA, dot-stuffing);
//! this file makes the connection it speaks over. lettre builds its own
//! rustls configuration from its own provider and roots and has no way to
//! take ours, so vigie does the TLS itself with the one aws-lc-rs provider
//! ([`crate::net::crypto_provider`]) and the Mozilla roots plus `ca_file` (default
//! `extra_ca_file`), and hands lettre a stream that is already encrypted:
//!
//! - `tls` (implicit, port 465): TCP, TLS handshake, then lettre reads the
//!   greeting and sends EHLO.
//! - `starttls` (port 587): greeting, EHLO and STARTTLS are done here in
//!   clear text (a dozen lines: lettre cannot upgrade a stream it did not
//!   make), then the handshake, then lettre starts over on the encrypted
//!   stream. RFC 3207 has no second greeting after STARTTLS but lettre
//!   expects one, so the stream replays a synthetic `220` before the first
//!   real byte; lettre's EHLO then goes to the server as the RFC requires,
//!   and the AUTH mechanisms it sees are the ones offered under TLS.
//!   STARTTLS is required, never opportunistic: a server that does not
//!   offer it gets no password and no alert.
//! - `none` (loopback only, enforced by `config`): plain TCP.
//!
//! Every step runs under one timeout. Every failure is a [`DeliveryError`]
//! that names the server and the step, says what to do, and carries a
//! [`Failure`] telling the sender whom to blame: the way to the server
//! (retry the whole queue later), this message (retry it later), or this
//! message for good (dead letter).

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use lettre::address::Envelope;
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{AsyncSmtpConnection, AsyncTokioStream};
use lettre::transport::smtp::extension::ClientId;
use lettre::transport::smtp::response::Response;
use rustls::pki_types::ServerName;
use rustls::{CertificateError, ClientConfig};
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf,
};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::MailError;
use crate::config::{SmtpConfig, SmtpTls};
use crate::tls_words;

/// Budget of each step (connect, greeting, handshake, AUTH, one message).
/// Generous for a relay, short enough that a black-holed server does not
/// hold shutdown for long.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest reply line accepted in the clear-text STARTTLS preamble
/// (RFC 5321 allows 512; servers pad their greetings).
const MAX_LINE: u64 = 4096;
/// Most lines of one reply in the preamble (an EHLO lists extensions).
const MAX_LINES: usize = 100;
/// What lettre is shown as greeting after STARTTLS (see the module docs).
const AFTER_STARTTLS: &[u8] = b"220 vigie: TLS established, greeting replayed\r\n";

/// Whom a failure blames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The server, or the way to it, or vigie's settings for it: nothing
    /// can be sent now; every message waits and the server is tried again
    /// later. Never costs a message.
    Transport,
    /// The server deferred this message (4xx): retry it later.
    Deferred,
    /// The server refused this message for good (5xx), or it cannot be
    /// built: it goes to the dead letters.
    Rejected,
}

/// Where in a delivery it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Connect,
    Greeting,
    Starttls,
    TlsHandshake,
    Auth,
    Send,
    Maildir,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::Connect => "connecting",
            Stage::Greeting => "greeting",
            Stage::Starttls => "STARTTLS",
            Stage::TlsHandshake => "TLS handshake",
            Stage::Auth => "AUTH",
            Stage::Send => "sending",
            Stage::Maildir => "writing to the Maildir",
        })
    }
}

/// One failed delivery attempt, for logs, `/healthz` and `vigie
/// test-email`: `smtp mail.example.com:587: AUTH: 535 5.7.8 bad
/// credentials (check username and the password in /run/...)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{server}: {stage}: {detail}{}", advice.as_deref().map(|a| format!(" ({a})")).unwrap_or_default())]
pub struct DeliveryError {
    /// `smtp HOST:PORT` or `maildir PATH`.
    pub server: String,
    pub stage: Stage,
    pub failure: Failure,
    /// The server's reply code, when it answered.
    pub code: Option<u16>,
    pub detail: String,
    pub advice: Option<String>,
}

/// How to reach the relay; built once from `[smtp]`, shared by every
/// session.
#[derive(Clone)]
pub struct SmtpTransport {
    host: String,
    port: u16,
    mode: SmtpTls,
    /// `None` for `tls = "none"`.
    tls: Option<Arc<ClientConfig>>,
    credentials: Option<(String, PathBuf)>,
    timeout: Duration,
    hello: ClientId,
}

impl fmt::Debug for SmtpTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SmtpTransport")
            .field("server", &self.server())
            .field("mode", &self.mode)
            .field("user", &self.credentials.as_ref().map(|(u, _)| u))
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl SmtpTransport {
    /// Reads the CA files now (a bad one is a startup error, not a retry
    /// loop); the password is read at each connection, so a rotated
    /// credential is picked up without a restart.
    pub fn new(config: &SmtpConfig, extra_ca_file: Option<&Path>) -> Result<Self, MailError> {
        let tls = match config.tls {
            SmtpTls::None => None,
            SmtpTls::Starttls | SmtpTls::Tls => {
                let ca_file = config.ca_file.as_deref().or(extra_ca_file);
                Some(client_config(ca_file)?)
            }
        };
        let credentials = match (&config.username, &config.password_file) {
            (Some(user), Some(file)) => Some((user.clone(), file.clone())),
            _ => None,
        };
        Ok(SmtpTransport {
            host: config.host.clone(),
            port: config.port,
            mode: config.tls,
            tls,
            credentials,
            timeout: DEFAULT_TIMEOUT,
            hello: ClientId::default(),
        })
    }

    /// Another budget per step (tests, `vigie test-email`).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// `smtp HOST:PORT`, as errors name it.
    pub fn server(&self) -> String {
        if self.host.contains(':') && !self.host.starts_with('[') {
            format!("smtp [{}]:{}", self.host, self.port)
        } else {
            format!("smtp {}:{}", self.host, self.port)
        }
    }

    /// `smtp HOST:PORT (starttls)`.
    pub fn describe(&self) -> String {
        let mode = match self.mode {
            SmtpTls::Starttls => "starttls",
            SmtpTls::Tls => "tls",
            SmtpTls::None => "no TLS",
        };
        format!("{} ({mode})", self.server())
    }

    /// Opens a session: connected, encrypted as configured, authenticated
    /// if credentials are set. Every failure here is a
    /// [`Failure::Transport`].
    pub async fn connect(&self) -> Result<Session, DeliveryError> {
        let password = self.password().await?;
        let tcp = self.open_tcp().await?;
        let (stream, tls_version) = match (self.mode, &self.tls) {
            (SmtpTls::Tls, Some(config)) => {
                let tls = self.handshake(config, tcp).await?;
                let version = tls_version(&tls);
                (SmtpStream::tls(tls, &[]), version)
            }
            (SmtpTls::Starttls, Some(config)) => {
                let mut tcp = tcp;
                self.starttls_preamble(&mut tcp).await?;
                let tls = self.handshake(config, tcp).await?;
                let version = tls_version(&tls);
                (SmtpStream::tls(tls, AFTER_STARTTLS), version)
            }
            _ => (SmtpStream::plain(tcp), None),
        };
        let connecting = AsyncSmtpConnection::connect_with_transport(Box::new(stream), &self.hello);
        let mut conn = match tokio::time::timeout(self.timeout, connecting).await {
            Err(_) => return Err(self.silent(Stage::Greeting)),
            Ok(Err(e)) => return Err(self.lettre_error(Stage::Greeting, &e)),
            Ok(Ok(conn)) => conn,
        };
        let mut user = None;
        if let (Some((name, file)), Some(password)) = (&self.credentials, password) {
            self.authenticate(&mut conn, name, file, password).await?;
            user = Some(name.clone());
        }
        Ok(Session {
            conn,
            server: self.server(),
            timeout: self.timeout,
            mode: self.mode,
            tls_version,
            user,
            broken: false,
        })
    }

    async fn password(&self) -> Result<Option<String>, DeliveryError> {
        let Some((_, file)) = &self.credentials else {
            return Ok(None);
        };
        match tokio::fs::read_to_string(file).await {
            // Only the line ending goes: `echo secret > file` leaves one,
            // but spaces may be part of a password.
            Ok(text) => Ok(Some(
                text.strip_suffix('\n')
                    .map(|t| t.strip_suffix('\r').unwrap_or(t))
                    .unwrap_or(&text)
                    .to_owned(),
            )),
            Err(e) => Err(self.error(
                Stage::Auth,
                None,
                format!("cannot read password_file {}: {e}", file.display()),
                Some("check the path and that vigie may read it; under systemd, LoadCredential= puts it in $CREDENTIALS_DIRECTORY".into()),
            )),
        }
    }

    async fn open_tcp(&self) -> Result<TcpStream, DeliveryError> {
        let connecting = TcpStream::connect((self.host.as_str(), self.port));
        match tokio::time::timeout(self.timeout, connecting).await {
            Err(_) => Err(self.error(
                Stage::Connect,
                None,
                format!("no connection within {:?}", self.timeout),
                Some("a firewall dropping packets, or the wrong host or port".into()),
            )),
            Ok(Err(e)) => Err(self.error(
                Stage::Connect,
                None,
                e.to_string(),
                Some(format!(
                    "is the relay running and listening on port {}?",
                    self.port
                )),
            )),
            Ok(Ok(tcp)) => {
                // Commands are small and each waits for its reply: Nagle
                // would only add latency.
                let _ = tcp.set_nodelay(true);
                Ok(tcp)
            }
        }
    }

    async fn handshake(
        &self,
        config: &Arc<ClientConfig>,
        tcp: TcpStream,
    ) -> Result<TlsStream<TcpStream>, DeliveryError> {
        let name =
            ServerName::try_from(self.host.trim_matches(['[', ']']).to_owned()).map_err(|e| {
                self.error(
                    Stage::TlsHandshake,
                    None,
                    format!("{:?} is not a host name TLS can verify: {e}", self.host),
                    Some("set host in [smtp] to the name on the relay's certificate".into()),
                )
            })?;
        let connector = tokio_rustls::TlsConnector::from(config.clone());
        match tokio::time::timeout(self.timeout, connector.connect(name, tcp)).await {
            Err(_) => Err(self.error(
                Stage::TlsHandshake,
                None,
                format!("no TLS answer within {:?}", self.timeout),
                self.wrong_mode_advice(),
            )),
            Ok(Err(e)) => Err(self.tls_error(&e)),
            Ok(Ok(tls)) => Ok(tls),
        }
    }

    /// Greeting, EHLO and STARTTLS in clear text; returns with the server
    /// waiting for our ClientHello.
    async fn starttls_preamble(&self, tcp: &mut TcpStream) -> Result<(), DeliveryError> {
        let mut reader = tokio::io::BufReader::new(tcp);
        let greeting = self.reply(Stage::Greeting, &mut reader).await?;
        if greeting.code != 220 {
            return Err(self.refused(Stage::Greeting, &greeting));
        }
        self.write(
            Stage::Greeting,
            &mut reader,
            &format!("EHLO {}\r\n", self.hello),
        )
        .await?;
        let ehlo = self.reply(Stage::Greeting, &mut reader).await?;
        if ehlo.code != 250 {
            return Err(self.refused(Stage::Greeting, &ehlo));
        }
        // The first line is the server's name; the others are keywords.
        let offers_starttls = ehlo.lines.iter().skip(1).any(|line| {
            line.split_whitespace()
                .next()
                .is_some_and(|k| k.eq_ignore_ascii_case("STARTTLS"))
        });
        if !offers_starttls {
            return Err(self.error(
                Stage::Starttls,
                None,
                "the server does not offer STARTTLS".into(),
                Some(format!(
                    "vigie never sends in clear text to a remote relay; if port {} speaks TLS from the first byte (usually 465), set tls = \"tls\"",
                    self.port
                )),
            ));
        }
        self.write(Stage::Starttls, &mut reader, "STARTTLS\r\n")
            .await?;
        let go = self.reply(Stage::Starttls, &mut reader).await?;
        if go.code != 220 {
            return Err(self.refused(Stage::Starttls, &go));
        }
        // Anything already buffered was sent before the handshake and would
        // be read as if it came through TLS: the classic STARTTLS command
        // injection (CVE-2011-0411 and its kin).
        if !reader.buffer().is_empty() {
            return Err(self.error(
                Stage::Starttls,
                None,
                "the server sent data after agreeing to STARTTLS".into(),
                Some(
                    "something between vigie and the relay is injecting data; not continuing"
                        .into(),
                ),
            ));
        }
        Ok(())
    }

    async fn reply<R: AsyncBufRead + Unpin>(
        &self,
        stage: Stage,
        reader: &mut R,
    ) -> Result<Reply, DeliveryError> {
        match tokio::time::timeout(self.timeout, read_reply(reader)).await {
            Err(_) => Err(self.silent(stage)),
            Ok(Err(e)) => Err(self.error(stage, None, e.to_string(), self.wrong_mode_advice())),
            Ok(Ok(reply)) => Ok(reply),
        }
    }

    async fn write<W: AsyncRead + AsyncWrite + Unpin>(
        &self,
        stage: Stage,
        w: &mut tokio::io::BufReader<W>,
        line: &str,
    ) -> Result<(), DeliveryError> {
        let writing = async {
            w.get_mut().write_all(line.as_bytes()).await?;
            w.get_mut().flush().await
        };
        match tokio::time::timeout(self.timeout, writing).await {
            Err(_) => Err(self.silent(stage)),
            Ok(Err(e)) => Err(self.error(stage, None, e.to_string(), None)),
            Ok(Ok(())) => Ok(()),
        }
    }

    async fn authenticate(
        &self,
        conn: &mut AsyncSmtpConnection,
        user: &str,
        file: &Path,
        password: String,
    ) -> Result<(), DeliveryError> {
        let credentials = Credentials::new(user.to_owned(), password);
        let mechanisms = [Mechanism::Plain, Mechanism::Login];
        match tokio::time::timeout(self.timeout, conn.auth(&mechanisms, &credentials)).await {
            Err(_) => Err(self.silent(Stage::Auth)),
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => {
                let mut err = self.lettre_error(Stage::Auth, &e);
                err.advice = Some(match err.code {
                    Some(_) => format!(
                        "check username {user:?} and the password in {}",
                        file.display()
                    ),
                    None => {
                        "the server offers neither AUTH PLAIN nor AUTH LOGIN on this connection; \
                             remove username and password_file if it needs none"
                            .into()
                    }
                });
                Err(err)
            }
        }
    }

    fn wrong_mode_advice(&self) -> Option<String> {
        Some(match self.mode {
            SmtpTls::Tls => format!(
                "if port {} expects STARTTLS (usually 587), set tls = \"starttls\"",
                self.port
            ),
            SmtpTls::Starttls => format!(
                "if port {} speaks TLS from the first byte (usually 465), set tls = \"tls\"",
                self.port
            ),
            SmtpTls::None => return None,
        })
    }

    fn silent(&self, stage: Stage) -> DeliveryError {
        // Silence before or during the handshake is the classic symptom of
        // a port that speaks the other TLS mode; later it is just silence.
        let advice = match stage {
            Stage::Greeting | Stage::Starttls | Stage::TlsHandshake => self.wrong_mode_advice(),
            _ => None,
        };
        self.error(
            stage,
            None,
            format!("no answer within {:?}", self.timeout),
            advice,
        )
    }

    fn refused(&self, stage: Stage, reply: &Reply) -> DeliveryError {
        self.error(
            stage,
            Some(reply.code),
            format!("{} {}", reply.code, reply.lines.join(" / ")),
            None,
        )
    }

    fn tls_error(&self, e: &io::Error) -> DeliveryError {
        let rustls_error = e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>());
        let (detail, advice) = match rustls_error {
            Some(rustls::Error::InvalidCertificate(cert)) => certificate_problem(cert, &self.host),
            Some(other) => (tls_words::error(other), self.wrong_mode_advice()),
            None => (e.to_string(), self.wrong_mode_advice()),
        };
        self.error(Stage::TlsHandshake, None, detail, advice)
    }

    /// Before a message is under way, every failure blames the server.
    fn lettre_error(&self, stage: Stage, e: &lettre::transport::smtp::Error) -> DeliveryError {
        let mut err = classify(&self.server(), stage, e);
        err.failure = Failure::Transport;
        err
    }

    fn error(
        &self,
        stage: Stage,
        code: Option<u16>,
        detail: String,
        advice: Option<String>,
    ) -> DeliveryError {
        DeliveryError {
            server: self.server(),
            stage,
            failure: Failure::Transport,
            code,
            detail,
            advice,
        }
    }
}

/// An open, ready session: send messages one after another, then
/// [`Session::quit`].
pub struct Session {
    conn: AsyncSmtpConnection,
    server: String,
    timeout: Duration,
    mode: SmtpTls,
    tls_version: Option<&'static str>,
    user: Option<String>,
    broken: bool,
}

impl Session {
    /// One message transaction (MAIL, RCPT..., DATA). `Ok` is the server's
    /// final reply: it has taken responsibility for the message.
    pub async fn send(
        &mut self,
        envelope: &Envelope,
        bytes: &[u8],
    ) -> Result<String, DeliveryError> {
        match tokio::time::timeout(self.timeout, self.conn.send(envelope, bytes)).await {
            Err(_) => {
                // Mid-transaction: the connection's state is unknown.
                self.broken = true;
                Err(DeliveryError {
                    server: self.server.clone(),
                    stage: Stage::Send,
                    failure: Failure::Transport,
                    code: None,
                    detail: format!("no reply within {:?}", self.timeout),
                    advice: None,
                })
            }
            Ok(Err(e)) => {
                // lettre closes the connection after any negative reply.
                self.broken = true;
                Err(classify(&self.server, Stage::Send, &e))
            }
            Ok(Ok(response)) => Ok(reply_text(&response)),
        }
    }

    /// False once a failure left the connection closed or in an unknown
    /// state: open a new session for the next message.
    pub fn is_usable(&self) -> bool {
        !self.broken && !self.conn.has_broken()
    }

    /// `STARTTLS, TLS 1.3, authenticated as vigie`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        match (self.mode, self.tls_version) {
            (SmtpTls::Starttls, Some(v)) => parts.push(format!("STARTTLS, {v}")),
            (SmtpTls::Tls, Some(v)) => parts.push(format!("implicit TLS, {v}")),
            _ => parts.push("no TLS".to_owned()),
        }
        match &self.user {
            Some(user) => parts.push(format!("authenticated as {user}")),
            None => parts.push("no AUTH".to_owned()),
        }
        parts.join(", ")
    }

    /// Says goodbye; a server that does not answer is not waited for long.
    pub async fn quit(mut self) {
        if self.is_usable() {
            let _ = tokio::time::timeout(Duration::from_secs(5), self.conn.quit()).await;
        }
    }
}

/// A reply in the clear-text preamble.
#[derive(Debug)]
struct Reply {
    code: u16,
    /// Text after the code, one per line.
    lines: Vec<String>,
}

/// Reads one (possibly multi-line) reply: `250-a`, `250-b`, `250 c`.
async fn read_reply<R: AsyncBufRead + Unpin>(reader: &mut R) -> io::Result<Reply> {
    let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
    let mut lines = Vec::new();
    let mut code = None;
    loop {
        let mut raw = Vec::new();
        let n = AsyncReadExt::take(&mut *reader, MAX_LINE)
            .read_until(b'\n', &mut raw)
            .await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            ));
        }
        let line = String::from_utf8_lossy(&raw);
        let line = line.trim_end_matches(['\r', '\n']);
        let this_code = line
            .get(..3)
            .and_then(|c| c.parse::<u16>().ok())
            .ok_or_else(|| invalid(format!("not an SMTP reply: {line:?}")))?;
        if code.is_some_and(|c| c != this_code) || lines.len() >= MAX_LINES {
            return Err(invalid(format!("malformed multi-line reply at {line:?}")));
        }
        code = Some(this_code);
        let more = line.as_bytes().get(3) == Some(&b'-');
        lines.push(line.get(4..).unwrap_or_default().to_owned());
        if !more {
            return Ok(Reply {
                code: this_code,
                lines,
            });
        }
    }
}

/// What a lettre error during a message means for that message.
fn classify(server: &str, stage: Stage, e: &lettre::transport::smtp::Error) -> DeliveryError {
    let source = std::error::Error::source(e).map(|s| s.to_string());
    let mut err = DeliveryError {
        server: server.to_owned(),
        stage,
        failure: Failure::Transport,
        code: None,
        detail: e.to_string(),
        advice: None,
    };
    if let Some(code) = e.status() {
        let code = u16::from(code);
        err.code = Some(code);
        err.detail = format!("{code} {}", source.unwrap_or_default());
        let (failure, advice) = reply_failure(code);
        err.failure = failure;
        err.advice = advice.map(str::to_owned);
    } else if e.is_client() {
        // lettre refused to send it (non-ASCII envelope without SMTPUTF8):
        // the same message will be refused the same way next time.
        err.failure = Failure::Rejected;
    } else if e.is_timeout() {
        err.detail = "timed out".into();
    }
    err
}

/// RFC 5321 4.2.1: 4xx try again, 5xx do not. Two exceptions blame the
/// server rather than the message: 421 (the server is closing the
/// connection) and 530 (it wants AUTH that is not configured), so that a
/// misconfiguration never turns the queue into dead letters.
fn reply_failure(code: u16) -> (Failure, Option<&'static str>) {
    match code {
        421 => (
            Failure::Transport,
            Some("the server is shutting down or overloaded; retried"),
        ),
        530 => (
            Failure::Transport,
            Some("the server requires AUTH: set username and password_file in [smtp]"),
        ),
        400..=499 => (
            Failure::Deferred,
            Some("the server asked to try this message again later"),
        ),
        500..=599 => (
            Failure::Rejected,
            Some("the server refused this message for good; it is kept in the dead letters"),
        ),
        _ => (Failure::Transport, None),
    }
}

/// `250 2.0.0 Ok: queued as 4ABC`.
fn reply_text(response: &Response) -> String {
    let text: Vec<&str> = response.message().collect();
    format!("{} {}", response.code(), text.join(" / "))
}

/// The relay's certificate refused: the reason in the words the probe uses
/// (`tls_words`), with the fix where the configuration holds it.
fn certificate_problem(err: &CertificateError, host: &str) -> (String, Option<String>) {
    let advice = match err {
        CertificateError::UnknownIssuer => Some(
            "if the relay uses a private CA, set ca_file in [smtp] to its root certificate (PEM)",
        ),
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            Some("set host in [smtp] to a name the certificate covers")
        }
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            Some("the relay's certificate must be renewed")
        }
        _ => None,
    };
    let detail = match err {
        CertificateError::UnknownIssuer => {
            "the server's certificate is not signed by a trusted CA".to_string()
        }
        CertificateError::NotValidForName => {
            format!("the server's certificate does not cover {host}")
        }
        other => tls_words::certificate(other, None),
    };
    (detail, advice.map(str::to_string))
}

fn tls_version(tls: &TlsStream<TcpStream>) -> Option<&'static str> {
    use rustls::ProtocolVersion;
    Some(match tls.get_ref().1.protocol_version()? {
        ProtocolVersion::TLSv1_3 => "TLS 1.3",
        ProtocolVersion::TLSv1_2 => "TLS 1.2",
        _ => "TLS (old version)",
    })
}

/// Mozilla's roots plus the operator's CA file (see [`crate::net::roots`]).
fn client_config(ca_file: Option<&Path>) -> Result<Arc<ClientConfig>, MailError> {
    let roots = crate::net::roots(ca_file).map_err(|err| MailError::CaFile {
        path: ca_file.map(Path::to_path_buf).unwrap_or_default(),
        detail: err.to_string(),
    })?;
    Ok(Arc::new(crate::net::client_config(roots)))
}

/// The stream lettre talks over: plain or already-encrypted TCP, with
/// bytes to replay before the first real read (the greeting after
/// STARTTLS).
#[derive(Debug)]
struct SmtpStream {
    replay: &'static [u8],
    replayed: usize,
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl SmtpStream {
    fn plain(tcp: TcpStream) -> Self {
        SmtpStream {
            replay: &[],
            replayed: 0,
            inner: Inner::Plain(tcp),
        }
    }

    fn tls(tls: TlsStream<TcpStream>, replay: &'static [u8]) -> Self {
        SmtpStream {
            replay,
            replayed: 0,
            inner: Inner::Tls(Box::new(tls)),
        }
    }
}

impl AsyncTokioStream for SmtpStream {
    fn peer_addr(&self) -> io::Result<SocketAddr> {
        match &self.inner {
            Inner::Plain(tcp) => tcp.peer_addr(),
            Inner::Tls(tls) => tls.get_ref().0.peer_addr(),
        }
    }
}

impl AsyncRead for SmtpStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.replayed < this.replay.len() {
            let rest = &this.replay[this.replayed..];
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            this.replayed += n;
            return Poll::Ready(Ok(()));
        }
        match &mut this.inner {
            Inner::Plain(tcp) => Pin::new(tcp).poll_read(cx, buf),
            Inner::Tls(tls) => Pin::new(tls.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for SmtpStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.inner {
            Inner::Plain(tcp) => Pin::new(tcp).poll_write(cx, buf),
            Inner::Tls(tls) => Pin::new(tls.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.inner {
            Inner::Plain(tcp) => Pin::new(tcp).poll_flush(cx),
            Inner::Tls(tls) => Pin::new(tls.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.inner {
            Inner::Plain(tcp) => Pin::new(tcp).poll_shutdown(cx),
            Inner::Tls(tls) => Pin::new(tls.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relay_certificate_problems_are_in_words_with_the_fix() {
        use rustls::pki_types::UnixTime;
        let at = |secs| UnixTime::since_unix_epoch(Duration::from_secs(secs));
        let expired = CertificateError::ExpiredContext {
            time: at(1_800_000_000),
            not_after: at(1_700_000_000),
        };
        let (detail, advice) = certificate_problem(&expired, "smtp.example.test");
        assert_eq!(
            detail,
            "a certificate of the chain expired on 2023-11-14 22:13 UTC"
        );
        assert_eq!(
            advice.as_deref(),
            Some("the relay's certificate must be renewed")
        );
        let ca_as_leaf = CertificateError::Other(rustls::OtherError(std::sync::Arc::new(
            webpki::Error::CaUsedAsEndEntity,
        )));
        assert_eq!(
            certificate_problem(&ca_as_leaf, "smtp.example.test"),
            (
                "a CA certificate is used as the server certificate".to_string(),
                None
            )
        );
    }

    async fn parse(text: &str) -> io::Result<Reply> {
        read_reply(&mut text.as_bytes()).await
    }

    #[tokio::test]
    async fn replies_single_and_multi_line() {
        let r = parse("220 mx.example ESMTP\r\n").await.unwrap();
        assert_eq!(
            (r.code, r.lines.as_slice()),
            (220, &["mx.example ESMTP".to_owned()][..])
        );
        let r = parse("250-mx.example\r\n250-PIPELINING\r\n250 STARTTLS\r\nleftover")
            .await
            .unwrap();
        assert_eq!(r.code, 250);
        assert_eq!(r.lines, ["mx.example", "PIPELINING", "STARTTLS"]);
        let r = parse("250\r\n").await.unwrap();
        assert_eq!((r.code, r.lines.as_slice()), (250, &[String::new()][..]));
    }

    #[tokio::test]
    async fn malformed_replies_are_errors() {
        assert!(parse("").await.is_err(), "closed");
        assert!(parse("HTTP/1.1 400 Bad Request\r\n").await.is_err());
        assert!(parse("250-a\r\n251 b\r\n").await.is_err(), "codes differ");
        assert!(parse("250-a\r\n").await.is_err(), "cut short");
    }

    #[test]
    fn reply_codes_blame_the_right_party() {
        assert_eq!(reply_failure(451).0, Failure::Deferred);
        assert_eq!(reply_failure(452).0, Failure::Deferred);
        assert_eq!(reply_failure(550).0, Failure::Rejected);
        assert_eq!(reply_failure(554).0, Failure::Rejected);
        assert_eq!(reply_failure(421).0, Failure::Transport);
        assert_eq!(reply_failure(530).0, Failure::Transport);
    }

    #[test]
    fn errors_name_server_step_and_remedy() {
        let err = DeliveryError {
            server: "smtp mail.example.com:587".into(),
            stage: Stage::Auth,
            failure: Failure::Transport,
            code: Some(535),
            detail: "535 5.7.8 bad credentials".into(),
            advice: Some("check username \"vigie\"".into()),
        };
        assert_eq!(
            err.to_string(),
            "smtp mail.example.com:587: AUTH: 535 5.7.8 bad credentials (check username \"vigie\")"
        );
    }

    #[test]
    fn ipv6_hosts_are_bracketed() {
        let config = SmtpConfig {
            host: "::1".into(),
            port: 25,
            tls: SmtpTls::None,
            username: None,
            password_file: None,
            ca_file: None,
            watch: false,
        };
        let transport = SmtpTransport::new(&config, None).unwrap();
        assert_eq!(transport.server(), "smtp [::1]:25");
    }
}
