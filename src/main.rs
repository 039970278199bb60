//! The command line: parse arguments, call the library, map results to
//! exit codes (monitoring-plugins convention: 0 OK, 1 WARNING, 2 CRITICAL,
//! 3 UNKNOWN for config, usage and internal errors).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};

use vigie::clock::{Clock, SystemClock};
use vigie::outcome::Status;
use vigie::{app, config, render};

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    match cli.command {
        Command::Validate => validate(&cli.config),
        Command::Check { names, json } => check(&cli.config, &names, json),
    }
}

fn validate(path: &std::path::Path) -> ExitCode {
    match config::load(path) {
        Ok(config) => {
            println!(
                "{}: OK ({} checks from {})",
                path.display(),
                config.checks.len(),
                config.checks_dir.display()
            );
            ExitCode::SUCCESS
        }
        Err(errors) => {
            eprintln!("{errors}");
            ExitCode::from(EXIT_UNKNOWN)
        }
    }
}

fn check(path: &std::path::Path, names: &[String], json: bool) -> ExitCode {
    let config = match config::load(path) {
        Ok(config) => config,
        Err(errors) => {
            eprintln!("{errors}");
            return ExitCode::from(EXIT_UNKNOWN);
        }
    };
    let selected = match config.select(names) {
        Ok(selected) => selected,
        Err(message) => {
            eprintln!("vigie: {message}");
            return ExitCode::from(EXIT_UNKNOWN);
        }
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let prober = match app::prober(&config, clock.clone()) {
        Ok(prober) => prober,
        Err(err) => {
            eprintln!("vigie: {err}");
            return ExitCode::from(EXIT_UNKNOWN);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("vigie: cannot start the async runtime: {err}");
            return ExitCode::from(EXIT_UNKNOWN);
        }
    };
    let outcomes = runtime.block_on(app::check_now(
        &prober,
        clock.as_ref(),
        &selected,
        config.concurrency,
    ));
    match json {
        true => println!("{}", render::json(&outcomes)),
        false => print!("{}", render::table(&outcomes)),
    }
    let worst = outcomes
        .iter()
        .map(|o| o.status)
        .max()
        .unwrap_or(Status::Up);
    ExitCode::from(worst.exit_code() as u8)
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("VIGIE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(false).init(),
        LogFormat::Json => builder.json().init(),
    }
}
