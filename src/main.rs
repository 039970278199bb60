//! The command line: parse arguments, call the library, map results to
//! exit codes (monitoring-plugins convention: 0 OK, 1 WARNING, 2 CRITICAL,
//! 3 UNKNOWN for config, usage and internal errors).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};

use vigie::cli::render;
use vigie::clock::{Clock, SystemClock};
use vigie::incident_update::UpdateState;
use vigie::outcome::Status;
use vigie::{cli, config, daemon, runner};

const EXIT_UNKNOWN: u8 = 3;

#[derive(Parser)]
#[command(
    name = "vigie",
    version,
    about = "Out-of-band monitoring of HTTPS origins, certificates and bucket CORS"
)]
struct Cli {
    /// The daemon config file.
    #[arg(
        long,
        global = true,
        env = "VIGIE_CONFIG",
        default_value = "config.toml"
    )]
    config: PathBuf,
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Probe now and print; exit 0 all up, 1 some warn, 2 some down.
    Check {
        /// Checks to run (default: all).
        names: Vec<String>,
        /// Print the outcomes as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Load the config and checks; print every problem as FILE:LINE:COL: message.
    Validate,
    /// Run the daemon in the foreground (systemd Type=notify).
    Run,
    /// Show stored results of one check (asks the running daemon, else opens the store).
    History {
        /// The check's name.
        name: String,
        /// How far back, e.g. "24h", "7d".
        #[arg(long, default_value = "24h", value_parser = humantime::parse_duration)]
        since: std::time::Duration,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// The certificate report (asks the running daemon, else reads the store; probes now if nothing is stored).
    Report {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Also mail it now to [report] to.
        #[arg(long)]
        send: bool,
    },
    /// Hold pages for checks matching PATTERN (glob: * and ?); probes and history go on.
    Silence {
        /// Check-name glob, e.g. "staging-*"; "*" silences everything.
        pattern: String,
        /// How long, e.g. "8h".
        #[arg(long = "for", value_parser = humantime::parse_duration)]
        duration: std::time::Duration,
        /// Why (shown in the daily report and the held pages).
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Remove the silence of PATTERN before it ends.
    Unsilence { pattern: String },
    /// Incident updates: what the on-call person says about an incident
    /// (on the incident pages, the status page and its feed).
    Incident {
        #[command(subcommand)]
        action: IncidentAction,
    },
    /// Send one message through the configured delivery and say what happened.
    TestEmail,
    /// Send one test event through each push channel (or NAME) and say what each answered.
    TestNotify {
        /// One `[[notify]]` channel's name; all of them without it.
        name: Option<String>,
    },
    /// Rebuild the local history from the off-region replica (stop the daemon first).
    Restore {
        /// Another replica than `[replication] url`, same endpoint and keys:
        /// s3://BUCKET/NODE (e.g. the old VM's node name).
        #[arg(long)]
        from: Option<String>,
    },
    /// The history store itself.
    Store {
        #[command(subcommand)]
        action: StoreAction,
    },
    /// Several vantages: their keys.
    Vantage {
        #[command(subcommand)]
        action: VantageAction,
    },
    /// The man page and shell completions, from this very definition (for
    /// packagers: scripts/package.sh).
    #[command(hide = true)]
    Generate {
        #[command(subcommand)]
        what: Generate,
    },
}

#[derive(Subcommand)]
enum Generate {
    /// Write DIR/vigie.1 and a page per command (vigie-check.1, ...).
    Man {
        #[arg(long)]
        out: PathBuf,
    },
    /// Write the completion script of SHELL into DIR (bash: vigie.bash,
    /// zsh: _vigie).
    Completions {
        shell: clap_complete::Shell,
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(Subcommand)]
enum VantageAction {
    /// Write DIR/NODE.key (mode 0600) and print NODE's `peers` entry, last.
    Keygen {
        /// The vantage's name (its `[vantage] node`).
        node: String,
        /// Where to write NODE.key.
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(Subcommand)]
enum IncidentAction {
    /// Add an update to CHECK's open incident, else to its latest one
    /// (through the running daemon).
    Note {
        /// The check whose incident it is about.
        check: String,
        /// investigating, identified, monitoring or resolved.
        #[arg(long, default_value_t = UpdateState::default())]
        state: UpdateState,
        /// Another incident of CHECK, by key (`vigie incident list`).
        #[arg(long)]
        incident: Option<String>,
        /// What is known, in Markdown.
        text: String,
    },
    /// Open and recent incidents, newest first, with their keys and updates.
    List {
        /// Only this check's.
        check: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum StoreAction {
    /// Clear the notice of a corrupt store that was moved aside (the
    /// moved directory stays on disk).
    AckCorrupt,
}

fn main() -> ExitCode {
    private_files();
    let cli = Cli::parse();
    // The daemon reports its life at info; one-shot commands only warn.
    let level = match cli.command {
        Command::Run => "info",
        _ => "warn",
    };
    init_logging(cli.log_format, level);
    match cli.command {
        Command::Validate => validate(&cli.config),
        Command::Check { names, json } => check(&cli.config, &names, json),
        Command::Run => run(&cli.config),
        Command::History { name, since, json } => history(&cli.config, &name, since, json),
        Command::Restore { from } => restore(&cli.config, from.as_deref()),
        Command::Store {
            action: StoreAction::AckCorrupt,
        } => ack_corrupt(&cli.config),
        Command::Report { json, send } => report(&cli.config, json, send),
        Command::Silence {
            pattern,
            duration,
            reason,
        } => silence(&cli.config, &pattern, duration, &reason),
        Command::Unsilence { pattern } => unsilence(&cli.config, &pattern),
        Command::Incident { action } => incident(&cli.config, action),
        Command::TestEmail => test_email(&cli.config),
        Command::TestNotify { name } => test_notify(&cli.config, name.as_deref()),
        Command::Vantage {
            action: VantageAction::Keygen { node, out },
        } => keygen(&node, &out),
        Command::Generate { what } => generate(what),
    }
}

/// `vigie generate`: writes the files, then says where.
fn generate(what: Generate) -> ExitCode {
    use clap::CommandFactory;
    let mut command = Cli::command();
    let written = match what {
        Generate::Man { out } => clap_mangen::generate_to(command, &out).map(|()| out),
        Generate::Completions { shell, out } => {
            clap_complete::generate_to(shell, &mut command, "vigie", &out)
        }
    };
    match written {
        Ok(path) => {
            println!("wrote {}", path.display());
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("vigie generate: {why}");
            ExitCode::from(EXIT_UNKNOWN)
        }
    }
}

fn keygen(node: &str, out: &std::path::Path) -> ExitCode {
    match cli::keygen::keygen(node, out) {
        Ok(made) => {
            println!(
                "wrote {}: on {node}, set `[vantage] signing_key_file` to it",
                made.key_file.display()
            );
            println!("on every other vantage, add this entry to `[vantage] peers`:");
            println!("{}", made.peer_entry);
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("vigie vantage keygen: {why}");
            ExitCode::from(EXIT_UNKNOWN)
        }
    }
}

fn load_or_report(path: &std::path::Path) -> Option<config::Config> {
    match config::load(path) {
        Ok(config) => Some(config),
        Err(errors) => {
            eprintln!("{errors}");
            None
        }
    }
}

/// Everything vigie writes (the history, the outbox, the maildir, a store
/// set aside, the files `restore` rebuilds) is for its own user only,
/// whatever umask it was started with: systemd's unit sets `UMask=0077`,
/// but from a shell's 0022 sled created the history directory 0755 and its
/// files 0644, readable by every local user. With 0077 every directory
/// vigie (or sled) creates is 0700 and every file 0600.
fn private_files() {
    // SAFETY: umask(2) only sets this process's file-mode mask; it cannot
    // fail and touches no memory.
    unsafe {
        libc::umask(0o077);
    }
}

/// glibc's malloc defaults suit short programs more than a daemon that
/// runs for months: an arena per thread (up to 8 per core), and thresholds
/// that rise with every large free, after which freed memory is kept
/// instead of returned. Fixed thresholds and two arenas cut the daemon's
/// RSS at 10,000 checks from 126 to 112 MiB (`benches/daemon.rs`), at no
/// measurable CPU cost.
const DAEMON_ARENAS: libc::c_int = 2;

/// `vigie check` parses its config on the main thread, then probes from
/// others for a second or so: with a single arena the probes reuse the
/// memory the parse freed instead of each thread growing an arena of its
/// own (peak RSS at 1,000 checks 23.2 -> 20.5 MiB, `benches/compare.sh`),
/// and a few threads for one second hardly contend for its lock.
const CHECK_ARENAS: libc::c_int = 1;

/// `vigie restore` verifies the next segments on threads of their own
/// while one is put into the store: with an arena each, the threads' churn
/// of parsed results took the peak RSS of `benches/restore.rs` from 72 to
/// 109 MiB; with one arena it stays at 73 MiB, as fast.
const RESTORE_ARENAS: libc::c_int = 1;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn tune_allocator(arenas: libc::c_int) {
    const THRESHOLD: libc::c_int = 128 * 1024;
    // SAFETY: mallopt only sets malloc's parameters; it runs before the
    // runtime starts any other thread.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas);
        libc::mallopt(libc::M_MMAP_THRESHOLD, THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, THRESHOLD);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tune_allocator(_arenas: libc::c_int) {}

/// Threads for blocking work (store reads and writes, name lookups):
/// tokio allows 512 by default, twice the unit's `TasksMax=256`, so a burst
/// of slow lookups could make thread creation fail inside the daemon. With
/// 128, the worker threads (one per core), sled's few threads and these
/// stay under the limit on machines up to 64 cores; work beyond 128 waits
/// in tokio's queue instead of failing.
const MAX_BLOCKING_THREADS: usize = 128;

fn runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .enable_all()
        .build()
    {
        Ok(runtime) => Some(runtime),
        Err(err) => {
            eprintln!("vigie: cannot start the async runtime: {err}");
            None
        }
    }
}

fn run(path: &std::path::Path) -> ExitCode {
    tune_allocator(DAEMON_ARENAS);
    let Some((config, runtime)) = setup(path) else {
        return ExitCode::from(EXIT_UNKNOWN);
    };
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let result = runtime.block_on(async {
        let daemon = daemon::Daemon::new(path.to_path_buf(), config, clock);
        if let Err(err) = forward_signals(daemon.control()) {
            eprintln!("vigie: cannot install signal handlers: {err}");
            return Err(());
        }
        let ran = match daemon.start().await {
            Ok(running) => running.wait().await,
            Err(err) => Err(err),
        };
        ran.map_err(|err| {
            tracing::error!("{err}");
            eprintln!("vigie: {err}");
        })
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(()) => ExitCode::from(EXIT_UNKNOWN),
    }
}

/// SIGHUP reloads; SIGTERM and SIGINT stop. A second SIGINT/SIGTERM while
/// stopping is ignored: in-flight probes are bounded by their timeout.
fn forward_signals(control: tokio::sync::mpsc::Sender<daemon::Control>) -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hup = signal(SignalKind::hangup())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        loop {
            let command = tokio::select! {
                _ = hup.recv() => daemon::Control::Reload,
                _ = term.recv() => daemon::Control::Shutdown,
                _ = int.recv() => daemon::Control::Shutdown,
            };
            if control.send(command).await.is_err() {
                return;
            }
        }
    });
    Ok(())
}

fn history(path: &std::path::Path, name: &str, since: std::time::Duration, json: bool) -> ExitCode {
    let Some((config, runtime)) = setup(path) else {
        return ExitCode::from(EXIT_UNKNOWN);
    };
    let clock = SystemClock;
    match runtime.block_on(cli::history::history(&config, name, since, &clock)) {
        Ok(view) => {
            match json {
                true => out_json(&view),
                false => out(&render::history_table(&view.outcomes)),
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("vigie: {err}");
            ExitCode::from(EXIT_UNKNOWN)
        }
    }
}

/// Loads the config and builds a runtime, or says why not.
fn setup(path: &std::path::Path) -> Option<(config::Config, tokio::runtime::Runtime)> {
    let config = load_or_report(path)?;
    let runtime = runtime()?;
    Some((config, runtime))
}

fn report(path: &std::path::Path, json: bool, send: bool) -> ExitCode {
    let Some((config, runtime)) = setup(path) else {
        return ExitCode::from(EXIT_UNKNOWN);
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let report = match runtime.block_on(cli::report::report_command(&config, clock.clone())) {
        Ok(report) => report,
        Err(err) => {
            eprintln!("vigie: {err}");
            return ExitCode::from(EXIT_UNKNOWN);
        }
    };
    match json {
        true => out_json(&report),
        false => out(&vigie::alert::report::text(&report)),
    }
    if send {
        let to: Vec<String> = config.report.to.iter().map(ToString::to_string).collect();
        if to.is_empty() {
            eprintln!(
                "vigie: not sent: set `to` in [report] or [alerting] of {}",
                path.display()
            );
            return ExitCode::from(EXIT_UNKNOWN);
        }
        let message = vigie::alert::report::email(&report, &to);
        match runtime.block_on(vigie::mail::send_direct(&config, &message, clock.as_ref())) {
            Ok(how) => eprintln!("sent to {} via {how}", to.join(", ")),
            Err(err) => {
                eprintln!("vigie: the report was not sent: {err}");
                return ExitCode::from(EXIT_UNKNOWN);
            }
        }
    }
    ExitCode::SUCCESS
}

fn silence(
    path: &std::path::Path,
    pattern: &str,
    duration: std::time::Duration,
    reason: &str,
) -> ExitCode {
    let Some((config, runtime)) = setup(path) else {
        return ExitCode::from(EXIT_UNKNOWN);
    };
    let clock = SystemClock;
    match runtime.block_on(cli::silence::silence_command(
        &config, pattern, duration, reason, &clock,
    )) {
        Ok(silence) => {
            let until = vigie::when::second(silence.until);
            let covered: Vec<&str> = config
                .checks
                .iter()
                .filter(|c| silence.covers(&c.name))
                .map(|c| c.name.as_str())
                .collect();
            out(&format!(
                "silenced {:?} until {until}: {}\n",
                silence.pattern,
                match covered.is_empty() {
                    true => "matches no configured check (yet)".to_string(),
                    false => covered.join(", "),
                }
            ));
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("vigie: {err}");
            ExitCode::from(EXIT_UNKNOWN)
        }
    }
}

fn unsilence(path: &std::path::Path, pattern: &str) -> ExitCode {
    let Some((config, runtime)) = setup(path) else {
        return ExitCode::from(EXIT_UNKNOWN);
    };
    match runtime.block_on(cli::silence::unsilence_command(&config, pattern)) {
        Ok(true) => {
            out(&format!("removed the silence {pattern:?}\n"));
            ExitCode::SUCCESS
        }
        Ok(false) => {
            eprintln!("vigie: no silence with the pattern {pattern:?}");
            ExitCode::from(EXIT_UNKNOWN)
        }
        Err(err) => {
            eprintln!("vigie: {err}");
            ExitCode::from(EXIT_UNKNOWN)
        }
    }
}

fn incident(path: &std::path::Path, action: IncidentAction) -> ExitCode {
    let Some((config, runtime)) = setup(path) else {
        return ExitCode::from(EXIT_UNKNOWN);
    };
    let done = match action {
        IncidentAction::Note {
            check,
            state,
            incident,
            text,
        } => runtime
            .block_on(cli::incident::note(
                &config,
                &check,
                incident.as_deref(),
                state,
                &text,
            ))
            .map(|noted| out(&cli::incident::noted_text(&noted))),
        IncidentAction::List { check, json } => runtime
            .block_on(cli::incident::list(&config, check.as_deref()))
            .map(|listed| match json {
                true => out_json(&serde_json::json!({ "incidents": listed })),
                false => out(&cli::incident::list_text(&listed)),
            }),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("vigie: {err}");
            ExitCode::from(EXIT_UNKNOWN)
        }
    }
}

fn test_email(path: &std::path::Path) -> ExitCode {
    let Some((config, runtime)) = setup(path) else {
        return ExitCode::from(EXIT_UNKNOWN);
    };
    match runtime.block_on(vigie::mail::send_test(&config, &SystemClock)) {
        Ok(report) => {
            out(&format!("{report}\n"));
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("vigie: test message not sent: {err}");
            ExitCode::from(EXIT_UNKNOWN)
        }
    }
}

/// Exit 0 when every channel accepted the test event, 2 when one did not,
/// 3 when none could be tried.
fn test_notify(path: &std::path::Path, name: Option<&str>) -> ExitCode {
    let Some((config, runtime)) = setup(path) else {
        return ExitCode::from(EXIT_UNKNOWN);
    };
    let node = vigie::mail::hostname();
    let now = SystemClock.now();
    match runtime.block_on(vigie::push::send_test(&config, name, &node, now)) {
        Ok(tried) => {
            let mut text = String::new();
            for t in &tried {
                text.push_str(&format!("{} ({}): {}\n", t.channel, t.kind, t.words));
            }
            out(&vigie::sanitize::terminal(&text));
            match tried.iter().all(|t| t.accepted) {
                true => ExitCode::SUCCESS,
                false => ExitCode::from(Status::Down.exit_code() as u8),
            }
        }
        Err(err) => {
            eprintln!("vigie: {err}");
            ExitCode::from(EXIT_UNKNOWN)
        }
    }
}

/// Exit 0 when everything listed was restored, 2 when segments were
/// corrupt or missing (what could be read is restored all the same), 3 when
/// nothing could be done.
fn restore(path: &std::path::Path, from: Option<&str>) -> ExitCode {
    tune_allocator(RESTORE_ARENAS);
    let Some((config, runtime)) = setup(path) else {
        return ExitCode::from(EXIT_UNKNOWN);
    };
    match runtime.block_on(cli::restore::restore_command(&config, from)) {
        Ok(report) => {
            out(&format!("{report}\n"));
            match report.is_complete() {
                true => ExitCode::SUCCESS,
                false => ExitCode::from(Status::Down.exit_code() as u8),
            }
        }
        Err(err) => {
            eprintln!("vigie: {err}");
            ExitCode::from(EXIT_UNKNOWN)
        }
    }
}

fn ack_corrupt(path: &std::path::Path) -> ExitCode {
    let Some(config) = load_or_report(path) else {
        return ExitCode::from(EXIT_UNKNOWN);
    };
    match vigie::store::acknowledge(&config.state_dir) {
        Ok(Some(aside)) => {
            out(&format!(
                "cleared the notice; the damaged store stays at {} (delete it when you no longer need it)\n",
                aside.moved_to.display()
            ));
            ExitCode::SUCCESS
        }
        Ok(None) => {
            out("no corrupt store was moved aside\n");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!(
                "vigie: cannot remove {}: {err}",
                config
                    .state_dir
                    .join(vigie::store::CORRUPT_MARKER)
                    .display()
            );
            ExitCode::from(EXIT_UNKNOWN)
        }
    }
}

fn validate(path: &std::path::Path) -> ExitCode {
    let Some(config) = load_or_report(path) else {
        return ExitCode::from(EXIT_UNKNOWN);
    };
    for warning in &config.warnings {
        eprintln!("warning: {warning}");
    }
    out(&format!(
        "{}: OK ({} checks from {})\n",
        path.display(),
        config.checks.len(),
        config.checks_dir.display()
    ));
    ExitCode::SUCCESS
}

fn check(path: &std::path::Path, names: &[String], json: bool) -> ExitCode {
    tune_allocator(CHECK_ARENAS);
    let Some(config) = load_or_report(path) else {
        return ExitCode::from(EXIT_UNKNOWN);
    };
    let selected = match config.select(names) {
        Ok(selected) => selected,
        Err(message) => {
            eprintln!("vigie: {message}");
            return ExitCode::from(EXIT_UNKNOWN);
        }
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let prober = match runner::prober(&config, clock.clone()) {
        Ok(prober) => prober,
        Err(err) => {
            eprintln!("vigie: {err}");
            return ExitCode::from(EXIT_UNKNOWN);
        }
    };
    let Some(runtime) = runtime() else {
        return ExitCode::from(EXIT_UNKNOWN);
    };
    if json {
        let written = cli::check::json(
            &runtime,
            &prober,
            clock.as_ref(),
            &selected,
            config.concurrency,
        );
        return match written {
            Ok(written) => {
                if let Some(err) = written.error {
                    stdout_failed(err);
                }
                ExitCode::from(written.worst.exit_code() as u8)
            }
            Err(err) => {
                eprintln!("vigie: cannot start the probes: {err}");
                ExitCode::from(EXIT_UNKNOWN)
            }
        };
    }
    let outcomes = runtime.block_on(runner::check_now(
        &prober,
        clock.as_ref(),
        &selected,
        config.concurrency,
    ));
    out(&render::table(&outcomes));
    let worst = outcomes
        .iter()
        .map(|o| o.status)
        .max()
        .unwrap_or(Status::Up);
    ExitCode::from(worst.exit_code() as u8)
}

/// Writes a command's output. A reader that went away (`vigie check | head`)
/// is not an error worth a panic: the rest of the output is simply dropped.
/// Control characters other than line breaks are escaped: the output quotes
/// what targets sent (certificate names, refusals), possibly from a store
/// older than the sanitising of facts at capture.
fn out(text: &str) {
    use std::io::Write;
    let text = vigie::sanitize::terminal(text);
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
    if let Err(err) = written {
        stdout_failed(err);
    }
}

/// Says why stdout stopped taking the output, unless its reader simply
/// went away.
fn stdout_failed(err: std::io::Error) {
    if err.kind() != std::io::ErrorKind::BrokenPipe {
        eprintln!("vigie: cannot write to stdout: {err}");
    }
}

/// Writes `value` as pretty JSON (`--json`), with the control characters
/// serde_json leaves raw (DEL, C1, bidi) written as `\u` escapes.
fn out_json(value: &impl serde::Serialize) {
    let json = serde_json::to_string_pretty(value).unwrap_or_default();
    out(&format!("{}\n", vigie::sanitize::terminal_json(&json)));
}

fn init_logging(format: LogFormat, default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("VIGIE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // Under systemd, journald stamps every line itself.
    let journald = std::env::var_os("JOURNAL_STREAM").is_some();
    match (format, journald) {
        (LogFormat::Text, true) => builder.with_ansi(false).without_time().init(),
        (LogFormat::Text, false) => builder.with_ansi(false).init(),
        (LogFormat::Json, _) => builder.json().init(),
    }
}
