use std::process::ExitCode;

use clap::Parser;
use wsledger::cli::{run, Cli, ExitStatus, Printer};

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Before anything else: no thread or SQLite connection exists yet.
    let _ = wsledger::db::tune_sqlite_for_this_process();
    let cli = Cli::parse();
    let mut printer = Printer::stdio(&cli.global);
    let status = match run(cli, &mut printer) {
        Ok(status) => status,
        Err(e) => {
            printer.error(&e.message, &e.hint);
            ExitStatus::Error
        }
    };
    if let Err(e) = printer.flush() {
        // A closed pipe (`| head`) is not a failure of the tool.
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return ExitCode::from(2);
        }
    }
    ExitCode::from(status as u8)
}
