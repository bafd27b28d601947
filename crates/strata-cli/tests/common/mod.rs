//! What the `strata serve` process tests share: starting the binary on a free port, killing it
//! if a test fails first, and asking whether the Redis tools are installed.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A server process, killed if a failed assertion drops it (so no orphan keeps the test's
/// output open).
pub struct ServerProcess(pub Child);

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `strata serve <args>` (give `--port 0`) and returns it with the address it printed.
pub fn serve(args: &[&str]) -> (ServerProcess, String) {
    let child =
        Command::new(env!("CARGO_BIN_EXE_strata")).arg("serve").args(args).stderr(Stdio::piped()).spawn();
    let mut server = ServerProcess(child.unwrap());
    let mut banner = String::new();
    BufReader::new(server.0.stderr.take().unwrap()).read_line(&mut banner).unwrap();
    let addr = banner.split(" on ").nth(1).and_then(|rest| rest.split(' ').next());
    let addr = addr.unwrap_or_else(|| panic!("no address in {banner:?}")).to_string();
    (server, addr)
}

/// Whether every one of `tools` runs; if not, a test returns early, except in CI
/// (`STRATA_REQUIRE_REDIS_TOOLS`), where a missing tool is a failure.
pub fn tools_present(tools: &[&str]) -> bool {
    let works = |cmd: &&str| Command::new(cmd).arg("--version").output().is_ok_and(|o| o.status.success());
    if tools.iter().all(works) {
        return true;
    }
    assert!(
        std::env::var_os("STRATA_REQUIRE_REDIS_TOOLS").is_none(),
        "{tools:?}: one is missing (bash scripts/server-tools.sh installs them)"
    );
    eprintln!("skipped: one of {tools:?} is not installed (bash scripts/server-tools.sh)");
    false
}
