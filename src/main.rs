use std::process::ExitCode;

fn main() -> ExitCode {
    if vllm_diag::cli::reads_rules(std::env::args_os()) {
        vllm_diag::rules::preload();
    }
    let cli = vllm_diag::cli::parse();
    match vllm_diag::app::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            vllm_diag::write_stderr(format_args!("vllm-diag: error: {e}\n"));
            ExitCode::from(e.exit_code())
        }
    }
}
