//! The journal's line at start: what this vigie watches and where what it
//! finds goes, so that `journalctl -u vigie` answers "is it on, and will I
//! hear about it?" before the first result arrives.

use std::path::Path;

use crate::config::{Config, SmtpTls};

/// "vigie running: 12 checks; mail via smtp.example.com:587 (STARTTLS) to
/// oncall@example.com; replication to s3://bucket/node every 5m; vantage
/// fra with 2 peers; API http://127.0.0.1:9464, local socket
/// /run/vigie/api.sock".
pub fn words(config: &Config, socket: Option<&Path>) -> String {
    let checks = match config.checks.len() {
        1 => "1 check".to_string(),
        n => format!("{n} checks"),
    };
    let to: Vec<String> = config.alerting.to.iter().map(ToString::to_string).collect();
    let route = match &config.smtp {
        Some(smtp) => {
            let tls = match smtp.tls {
                SmtpTls::Starttls => "STARTTLS",
                SmtpTls::Tls => "TLS",
                SmtpTls::None => "no TLS",
            };
            format!("via {}:{} ({tls})", smtp.host, smtp.port)
        }
        None => format!(
            "into the maildir {} (no [smtp])",
            config.state_dir.join("maildir").display()
        ),
    };
    let mail = match config.alerting.enabled {
        true => format!("mail {route} to {}", to.join(", ")),
        false => format!("paging off ([alerting] enabled = false), mail {route}"),
    };
    let replication = match &config.replication {
        Some(r) => format!(
            "replication to {} every {}",
            r.url,
            crate::when::std_span(r.interval)
        ),
        None => "no replication (history on this disk only)".to_string(),
    };
    let vantage = match &config.vantage {
        Some(v) => match v.peers.len() {
            1 => format!("vantage {} with 1 peer", v.node),
            n => format!("vantage {} with {n} peers", v.node),
        },
        None => "one vantage (no [vantage])".to_string(),
    };
    let scheme = match config.api.tls {
        Some(_) => "https",
        None => "http",
    };
    let socket = match socket {
        Some(path) => format!("local socket {}", path.display()),
        None => "no local socket".to_string(),
    };
    format!(
        "vigie running: {checks}; {mail}; {replication}; {vantage}; API {scheme}://{}, {socket}",
        config.api.listen
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_config_s_line_says_where_mail_goes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("checks")).unwrap();
        std::fs::write(
            dir.path().join("checks/site.toml"),
            "[[check]]\nname = \"site\"\nkind = \"http\"\nurl = \"https://example.com/\"\n",
        )
        .unwrap();
        let text = "[alerting]\nto = [\"oncall@example.com\"]\n";
        let config = crate::config::load_str(&dir.path().join("config.toml"), text).unwrap();
        let socket = dir.path().join("state/api.sock");
        let line = words(&config, Some(&socket));
        assert_eq!(
            line,
            format!(
                "vigie running: 1 check; mail into the maildir {} (no [smtp]) to oncall@example.com; no replication (history on this disk only); one vantage (no [vantage]); API http://127.0.0.1:9464, local socket {}",
                dir.path().join("state/maildir").display(),
                socket.display()
            )
        );
    }
}
