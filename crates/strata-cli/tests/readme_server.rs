//! The README's `strata serve` quick start, run as written: each `redis-cli` line's output must
//! be what its comment says (redis-cli's terminal format, `--no-raw`).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// The commands of the README block after the `server-quick-start` marker.
fn quick_start() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let after = readme.split("<!-- server-quick-start").nth(1).expect("the README has the quick start");
    let block = after.split("```sh\n").nth(1).and_then(|b| b.split("```").next()).unwrap();
    block.lines().map(str::to_string).collect()
}

/// Kills the server if an assertion fails first (no orphan keeps the test's output open).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn redis_cli_present() -> bool {
    Command::new("redis-cli").arg("--version").output().is_ok_and(|o| o.status.success())
}

#[test]
fn the_readme_server_quick_start_runs_as_written() {
    if !redis_cli_present() {
        assert!(
            std::env::var_os("STRATA_REQUIRE_REDIS_TOOLS").is_none(),
            "redis-cli is missing (bash scripts/server-tools.sh installs it)"
        );
        eprintln!("skipped: redis-cli is not installed (bash scripts/server-tools.sh)");
        return;
    }
    let lines = quick_start();
    assert!(lines[0].starts_with("cargo build"), "{lines:?}");
    let dir = tempfile::tempdir().unwrap();
    let serve: Vec<&str> = lines[1].split('#').next().unwrap().split_whitespace().collect();
    assert_eq!(&serve[..3], ["target/release/strata", "serve", "/tmp/strata-redis"]);
    let mut args: Vec<String> = serve[1..serve.len() - 1].iter().map(|s| s.to_string()).collect();
    args[1] = dir.path().join("store").to_str().unwrap().to_string();
    let port_at = args.iter().position(|a| a == "--port").unwrap() + 1;
    args[port_at] = "0".into();
    let server =
        Command::new(env!("CARGO_BIN_EXE_strata")).args(&args).stderr(Stdio::piped()).spawn().unwrap();
    let mut server = KillOnDrop(server);
    let mut banner = String::new();
    BufReader::new(server.0.stderr.take().unwrap()).read_line(&mut banner).unwrap();
    let port =
        banner.split(" on ").nth(1).and_then(|r| r.split(' ').next()).and_then(|a| a.rsplit(':').next());
    let port = port.unwrap_or_else(|| panic!("{banner}")).to_string();
    for line in &lines[2..] {
        let (command, expected) = line.split_once('#').unwrap();
        let words: Vec<&str> = command.split_whitespace().collect();
        assert_eq!(&words[..3], ["redis-cli", "-p", "6380"], "{line}");
        let output =
            Command::new("redis-cli").args(["--no-raw", "-p", &port]).args(&words[3..]).output().unwrap();
        let printed = String::from_utf8_lossy(&output.stdout).trim().to_string();
        if words[3] == "SHUTDOWN" {
            assert_eq!(printed, "", "{line}");
        } else {
            assert_eq!(printed, expected.trim(), "{line}");
        }
    }
    assert!(server.0.wait().unwrap().success(), "SHUTDOWN ends the server cleanly");
}
