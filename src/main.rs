use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = vllm_diag::cli::Cli::parse();
    match vllm_diag::app::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("vllm-diag: error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
