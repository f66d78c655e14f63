//! `tollgate`: the command line. Everything else lives in the library.

use clap::{Parser, Subcommand};

/// mimalloc (default feature `mimalloc`): less time in the allocator than glibc malloc on the
/// request path (see bench/RESULTS.md).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Freed memory goes back to the OS at once (`purge_delay` 0) instead of after mimalloc 3's
/// default 1 s, which only runs when the freeing thread allocates again: after a burst of
/// connections the idle worker threads otherwise kept it (9 000 connections closed: 217 MiB RSS
/// kept, 79 MiB with this; no CPU cost measured, bench/RESULTS.md). An operator's
/// `MIMALLOC_PURGE_DELAY` wins.
#[cfg(feature = "mimalloc")]
fn allocator_settings() {
    /// `mi_option_purge_delay` in mimalloc.h's `mi_option_e` (not in the Rust bindings).
    const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one integer option; mimalloc reads options at each purge.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    }
}

#[cfg(not(feature = "mimalloc"))]
fn allocator_settings() {}

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;

const EXAMPLES: &str = "Examples:
  tollgate run -c gateway.yaml        serve (also the default: tollgate -c gateway.yaml)
  tollgate check -c gateway.yaml      validate a config like `nginx -t`, exit 1 on any problem
  tollgate schema > gateway.schema.json   JSON Schema of gateway.yaml for editors
  echo -n 's3cret' | tollgate hash-key   print the SHA-256 digest to store in identity.api_keys
  tollgate import envoy-ratelimit config/*.yaml   envoyproxy/ratelimit configs as limits: rules
  tollgate run -c gateway.yaml --upgrade & kill -QUIT <old pid>    zero-downtime binary upgrade
  kill -HUP <pid>                     reload gateway.yaml without dropping requests
  tollgate keys create --tenant acme --tier pro --name ci   issue an API key (admin API)
  tollgate blocks add ip 203.0.113.0/24 --for 1h --reason abuse   block a network fleet-wide";

/// Reverse-proxy API gateway with distributed (Redis-backed) rate limiting.
#[derive(Parser)]
#[command(name = "tollgate", version, about, after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Config file (when no subcommand is given: run).
    #[arg(short, long, default_value = "gateway.yaml", global = true)]
    config: PathBuf,
}

#[derive(Subcommand)]
enum Command {
    /// Serve traffic (the default).
    Run {
        /// Take the listening sockets over from a running tollgate (then SIGQUIT the old one).
        #[arg(long)]
        upgrade: bool,
    },
    /// Validate the config file and exit: 0 when valid, 1 with every problem listed.
    Check {
        /// The file to check (like `nginx -t -c`; `tollgate check FILE` = `tollgate check -c FILE`).
        file: Option<PathBuf>,
    },
    /// Read an API key from stdin and print its SHA-256 hex digest.
    HashKey,
    /// Print the JSON Schema of the config file (the shipped `gateway.schema.json`).
    Schema,
    /// Convert another tool's rate-limit config into `limits:` YAML, printed on stdout.
    Import {
        #[command(subcommand)]
        from: ImportFrom,
    },
    #[command(flatten)]
    Admin(Box<tollgate::cli::AdminCommand>),
}

#[derive(Subcommand)]
enum ImportFrom {
    /// envoyproxy/ratelimit config files → decision-service rules (docs/decision-service.md);
    /// what cannot be carried over is listed on stderr and as comments. Exit 1 on a bad file.
    EnvoyRatelimit {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

/// `tollgate import envoy-ratelimit FILE...`.
fn import_envoy_ratelimit(files: &[PathBuf]) -> ExitCode {
    let mut texts = Vec::with_capacity(files.len());
    for f in files {
        match std::fs::read_to_string(f) {
            Ok(t) => texts.push((f.display().to_string(), t)),
            Err(e) => {
                eprintln!("{}: {e}", f.display());
                return ExitCode::FAILURE;
            }
        }
    }
    match tollgate::config::import::envoy_ratelimit::import(&texts) {
        Ok(imported) => {
            for l in &imported.lost {
                eprintln!("not carried over: {l}");
            }
            print!("{}", imported.yaml());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr and never make a request wait for it: general lines through a background
/// writer thread (lossy: past its bound lines are dropped and counted), access lines batched
/// first (`tollgate::observe::access_log`, bounded by `observability.log_buffer_bytes`) and
/// written by their own thread. The returned guards flush on drop (at exit), access lines first.
fn init_tracing(json: bool, access_buffer_bytes: usize) -> LogGuards {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let (writer, stderr) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(true)
        .finish(std::io::stderr());
    let dropped = writer.error_counter();
    tollgate::observe::metrics::count_other_log_drops(move || dropped.dropped_lines() as u64);
    let (access, access_guard) = tollgate::observe::access_log::batched(
        std::io::stderr(),
        tollgate::observe::access_log::BatchConfig {
            max_bytes: access_buffer_bytes,
            ..Default::default()
        },
    );
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(tollgate::observe::access_log::RoutedWriter::new(
            access, writer,
        ))
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none());
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
    LogGuards {
        _access: access_guard,
        _stderr: stderr,
    }
}

/// Dropped in field order: the access log writes its last batch, then the general writer
/// flushes.
struct LogGuards {
    _access: tollgate::observe::access_log::AccessLogGuard,
    _stderr: tracing_appender::non_blocking::WorkerGuard,
}

fn print_errors(path: &std::path::Path, errors: &[tollgate::config::ConfigError]) {
    eprintln!("{}: {} problem(s)", path.display(), errors.len());
    for e in errors {
        eprintln!("{e}");
    }
}

fn main() -> ExitCode {
    // Ignore SIGHUP until the reload service installs its handler (the default action kills).
    unsafe {
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
    }
    allocator_settings();
    let cli = Cli::parse();
    match cli.command.unwrap_or(Command::Run { upgrade: false }) {
        Command::Import {
            from: ImportFrom::EnvoyRatelimit { files },
        } => import_envoy_ratelimit(&files),
        Command::Admin(command) => tollgate::cli::run(*command),
        Command::Schema => {
            print!("{}", tollgate::config::schema::gateway_schema_text());
            ExitCode::SUCCESS
        }
        Command::HashKey => {
            let mut key = String::new();
            if std::io::stdin().read_to_string(&mut key).is_err() {
                eprintln!("cannot read the key from stdin");
                return ExitCode::FAILURE;
            }
            let key = key.strip_suffix('\n').unwrap_or(&key);
            if key.is_empty() {
                eprintln!(
                    "the key is empty: pipe it in, e.g. echo -n 's3cret' | tollgate hash-key"
                );
                return ExitCode::FAILURE;
            }
            println!("{}", tollgate::identity::hash_key(key));
            ExitCode::SUCCESS
        }
        Command::Check { file } => {
            let path = file.unwrap_or(cli.config);
            match tollgate::runtime::server::load_snapshot(&path) {
                Ok(snapshot) => {
                    for w in tollgate::config::warnings::warnings(&snapshot.config) {
                        eprintln!("warning: {w}");
                    }
                    println!("{}: configuration ok", path.display());
                    ExitCode::SUCCESS
                }
                Err(errors) => {
                    print_errors(&path, &errors);
                    ExitCode::FAILURE
                }
            }
        }
        Command::Run { upgrade } => {
            let (json, buffer) = tollgate::config::load(&cli.config)
                .map(|c| (c.observability.json_logs, c.observability.log_buffer_bytes))
                .unwrap_or((false, tollgate::config::DEFAULT_LOG_BUFFER_BYTES));
            let _log_guard = init_tracing(json, buffer);
            match tollgate::runtime::server::run(&cli.config, upgrade) {
                Ok(()) => ExitCode::SUCCESS,
                Err(errors) => {
                    print_errors(&cli.config, &errors);
                    ExitCode::FAILURE
                }
            }
        }
    }
}
