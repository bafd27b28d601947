//! The README's `strata serve` quick start, run as written: each `redis-cli` line's output must
//! be what its comment says (redis-cli's terminal format, `--no-raw`).

mod common;

use std::process::Command;

/// The commands of the README block after the `server-quick-start` marker.
fn quick_start() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let after = readme.split("<!-- server-quick-start").nth(1).expect("the README has the quick start");
    let block = after.split("```sh\n").nth(1).and_then(|b| b.split("```").next()).unwrap();
    block.lines().map(str::to_string).collect()
}

#[test]
fn the_readme_server_quick_start_runs_as_written() {
    if !common::tools_present(&["redis-cli"]) {
        return;
    }
    let lines = quick_start();
    assert!(lines[0].starts_with("cargo build"), "{lines:?}");
    let dir = tempfile::tempdir().unwrap();
    let serve: Vec<&str> = lines[1].split('#').next().unwrap().split_whitespace().collect();
    assert_eq!(&serve[..3], ["target/release/strata", "serve", "/tmp/strata-redis"]);
    let mut args: Vec<String> = serve[2..serve.len() - 1].iter().map(|s| s.to_string()).collect();
    args[0] = dir.path().join("store").to_str().unwrap().to_string();
    let port_at = args.iter().position(|a| a == "--port").unwrap() + 1;
    args[port_at] = "0".into();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (mut server, addr) = common::serve(&args);
    let port = addr.rsplit(':').next().unwrap().to_string();
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
