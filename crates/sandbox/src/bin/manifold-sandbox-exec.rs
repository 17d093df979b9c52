//! The sandbox launcher: a fresh single-threaded process the gateway spawns in place of a stdio
//! server; it applies the plan in `MANIFOLD_SANDBOX_PLAN` and execs `-- PROGRAM ARGS...`.

fn main() -> std::process::ExitCode {
    manifold_sandbox::launch::run()
}
