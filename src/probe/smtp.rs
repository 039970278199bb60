//! `kind = "smtp"`: a mail server's TLS, reached as a mail client reaches
//! it. smtp:// reads the greeting, says EHLO, asks for STARTTLS (RFC 3207)
//! and shakes hands; smtps:// shakes hands first (RFC 8314) and then reads
//! the greeting and says EHLO inside TLS. No mail is sent: the probe says
//! QUIT once the chain is known.
//!
//! The SMTP side is kept to what the chain needs, and bounded as every
//! read from a target is: a reply line longer than [`LINE_CAP`] or a reply
//! of more than [`REPLY_LINES`] lines ends the probe with a reason, and the
//! check's timeout covers the whole conversation (a greeting that never
//! comes is a `timeout` saying so). Replies are framed here, line by
//! line, and read by lettre's parser once complete.
//!
//! What the server said is recorded in `trace.smtp` as it is said, so a
//! probe that stops half-way still reports how far it got.

use std::str::FromStr;

use lettre::transport::smtp::extension::{ClientId, Extension, ServerInfo};
use lettre::transport::smtp::response::Response;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::client::{Client, Phase, Trace};
use super::tls::Trust;
use crate::check::{Check, SmtpCheck, SmtpTlsMode};
use crate::outcome::{Assertion, ProbeError, SmtpReport};

/// Longest reply line accepted, CRLF included. RFC 5321 (4.5.3.1.5) allows
/// 512 octets; real servers stay far below, and a peer sending more is not
/// answering as a mail server does.
pub const LINE_CAP: usize = 1000;

/// Most lines in one reply: an EHLO answer lists a dozen extensions.
pub const REPLY_LINES: usize = 100;

/// Talks to the server until its chain is known (or it fails to get
/// there), recording what it said in `trace.smtp`.
pub async fn probe(
    client: &Client,
    check: &Check,
    smtp: &SmtpCheck,
    trust: &Trust,
    trace: &mut Trace,
) -> Result<(), ProbeError> {
    trace.smtp = Some(SmtpReport {
        tls: match smtp.tls {
            SmtpTlsMode::Starttls { .. } => "starttls",
            SmtpTlsMode::Implicit => "tls",
        }
        .to_string(),
        ..SmtpReport::default()
    });
    let tcp = client
        .open(&smtp.host, smtp.port, check.resolve, trace)
        .await?;
    match smtp.tls {
        SmtpTlsMode::Implicit => {
            let tls = client.secure(tcp, &smtp.host, trust, trace).await?;
            let mut session = Session::new(tls);
            session.greet(trace).await?;
            session.quit().await;
            Ok(())
        }
        SmtpTlsMode::Starttls { required } => {
            let mut session = Session::new(tcp);
            let server = session.greet(trace).await?;
            let offered = server.supports_feature(Extension::StartTls);
            report(trace).starttls_offered = Some(offered);
            if !offered {
                session.quit().await;
                return match required {
                    true => Err(starttls_error(
                        "the server does not offer STARTTLS in its EHLO answer: mail to it \
                         travels in clear text (offer STARTTLS, or set require_starttls = false)"
                            .to_string(),
                    )),
                    false => Ok(()),
                };
            }
            let tcp = session.starttls(trace).await?;
            let tls = client.secure(tcp, &smtp.host, trust, trace).await?;
            Session::new(tls).quit().await;
            Ok(())
        }
    }
}

/// The report [`probe`] put in the trace first.
fn report(trace: &mut Trace) -> &mut SmtpReport {
    trace.smtp.get_or_insert_with(SmtpReport::default)
}

/// One SMTP conversation over `io`, with what was read past the last
/// complete line.
struct Session<IO> {
    io: IO,
    buffer: Vec<u8>,
}

impl<IO: AsyncRead + AsyncWrite + Unpin> Session<IO> {
    fn new(io: IO) -> Self {
        Session {
            io,
            buffer: Vec::with_capacity(512),
        }
    }

    /// Reads the greeting and says EHLO; the EHLO answer's extensions.
    async fn greet(&mut self, trace: &mut Trace) -> Result<ServerInfo, ProbeError> {
        let started = Instant::now();
        trace.phase = Phase::Awaiting("the SMTP greeting");
        let greeting = self.reply(Assertion::SmtpBanner, "its greeting").await?;
        let shown = crate::sanitize::message(greeting.first_line().unwrap_or(""));
        let said = report(trace);
        said.banner = Some(shown.clone());
        said.banner_ms = Some(started.elapsed().as_secs_f64() * 1000.0);
        if !greeting.has_code(220) {
            return Err(ProbeError {
                kind: Assertion::SmtpBanner,
                message: format!(
                    "the server greeted with {} instead of 220 (it refuses sessions): {shown}",
                    greeting.code()
                ),
            });
        }
        let started = Instant::now();
        trace.phase = Phase::Awaiting("the answer to EHLO");
        let command = format!("EHLO {}\r\n", ClientId::default());
        self.send(&command, Assertion::SmtpEhlo).await?;
        let answer = self
            .reply(Assertion::SmtpEhlo, "its answer to EHLO")
            .await?;
        report(trace).ehlo_ms = Some(started.elapsed().as_secs_f64() * 1000.0);
        if !answer.has_code(250) {
            return Err(ProbeError {
                kind: Assertion::SmtpEhlo,
                message: format!(
                    "the server refused EHLO with {}: {}",
                    answer.code(),
                    crate::sanitize::message(answer.first_line().unwrap_or(""))
                ),
            });
        }
        ServerInfo::from_response(&answer).map_err(|err| ProbeError {
            kind: Assertion::SmtpEhlo,
            message: format!("the server's answer to EHLO is not SMTP: {err}"),
        })
    }

    /// Sends `QUIT` without waiting for the answer: the probe has what it
    /// came for, and a server that does not answer must not hold it.
    async fn quit(mut self) {
        let _ = self.io.write_all(b"QUIT\r\n").await;
        let _ = self.io.flush().await;
    }

    async fn send(&mut self, command: &str, stage: Assertion) -> Result<(), ProbeError> {
        let sent = self.io.write_all(command.as_bytes()).await;
        sent.map_err(|err| ProbeError {
            kind: stage,
            message: format!(
                "the server closed the connection before {} could be sent ({err})",
                command.split_whitespace().next().unwrap_or(command)
            ),
        })
    }

    /// One complete reply, its lines framed and bounded here, then parsed.
    async fn reply(&mut self, stage: Assertion, what: &str) -> Result<Response, ProbeError> {
        let fail = |message: String| ProbeError {
            kind: stage,
            message,
        };
        let mut text = String::new();
        for _ in 0..REPLY_LINES {
            let line = self.line().await.map_err(|why| match why {
                LineError::Closed => fail(format!(
                    "the server closed the connection before {what} was complete"
                )),
                LineError::TooLong => fail(format!(
                    "a line of {what} is longer than {LINE_CAP} bytes: not an SMTP server"
                )),
                LineError::Io(err) => fail(format!("reading {what} failed: {err}")),
            })?;
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\r', '\n']);
            let framed = line.len() >= 3 && line.as_bytes()[..3].iter().all(u8::is_ascii_digit);
            if !framed {
                return Err(fail(format!(
                    "{what} is not SMTP (a reply line starts with a three-digit code): {}",
                    crate::sanitize::message(line)
                )));
            }
            text.push_str(line);
            // A bare code is a last line too.
            if line.len() == 3 {
                text.push(' ');
            }
            text.push_str("\r\n");
            if line.as_bytes().get(3) != Some(&b'-') {
                return Response::from_str(&text)
                    .map_err(|err| fail(format!("{what} is not a valid SMTP reply ({err})")));
            }
        }
        Err(fail(format!(
            "{what} runs past {REPLY_LINES} lines: not an SMTP server"
        )))
    }

    /// One line, `\n` included, at most [`LINE_CAP`] bytes.
    async fn line(&mut self) -> Result<Vec<u8>, LineError> {
        loop {
            if let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
                return Ok(self.buffer.drain(..=end).collect());
            }
            if self.buffer.len() >= LINE_CAP {
                return Err(LineError::TooLong);
            }
            let mut chunk = [0u8; 512];
            let room = (LINE_CAP - self.buffer.len()).min(chunk.len());
            match self.io.read(&mut chunk[..room]).await {
                Ok(0) => return Err(LineError::Closed),
                Ok(n) => self.buffer.extend_from_slice(&chunk[..n]),
                Err(err) => return Err(LineError::Io(err)),
            }
        }
    }
}

enum LineError {
    Closed,
    TooLong,
    Io(std::io::Error),
}

impl Session<TcpStream> {
    /// Asks for STARTTLS; the bare connection once the server agreed.
    async fn starttls(mut self, trace: &mut Trace) -> Result<TcpStream, ProbeError> {
        trace.phase = Phase::Awaiting("the answer to STARTTLS");
        self.send("STARTTLS\r\n", Assertion::SmtpStarttls).await?;
        let answer = self
            .reply(Assertion::SmtpStarttls, "its answer to STARTTLS")
            .await?;
        if !answer.has_code(220) {
            return Err(starttls_error(format!(
                "the server offers STARTTLS but refused it with {}: {}",
                answer.code(),
                crate::sanitize::message(answer.first_line().unwrap_or(""))
            )));
        }
        // Bytes sent after the 220 and before the handshake would be read
        // as if they came over TLS: RFC 3207 forbids acting on them (it is
        // the STARTTLS command-injection flaw), so the probe refuses too.
        if !self.buffer.is_empty() {
            return Err(starttls_error(format!(
                "the server sent {} bytes after agreeing to STARTTLS, before the TLS handshake \
                 (a client must discard them: RFC 3207, section 4.2)",
                self.buffer.len()
            )));
        }
        Ok(self.io)
    }
}

fn starttls_error(message: String) -> ProbeError {
    ProbeError {
        kind: Assertion::SmtpStarttls,
        message,
    }
}
