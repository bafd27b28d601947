//! Three `strata serve` shards behind twemproxy (scripts/server-shards.sh): writes through the
//! proxy, one shard killed with SIGKILL and restarted, every acknowledged key read back through
//! the proxy.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/server-shards.sh");

/// A free loopback port (the kernel's choice, released at once).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn script(args: &[&str]) {
    let status = Command::new("bash").arg(SCRIPT).args(args).status().unwrap();
    assert!(status.success(), "server-shards.sh {args:?}");
}

fn redis_cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli").args(["-p", &port.to_string()]).args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Stops the shards and the proxy however the test ends.
struct Shards(String);

impl Drop for Shards {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(SCRIPT).args(["stop", "--dir", &self.0]).status();
    }
}

#[test]
fn a_killed_shard_comes_back_with_every_acknowledged_key() {
    if !common::tools_present(&["nutcracker", "redis-cli"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dir_text = dir.path().join("shards").to_str().unwrap().to_string();
    // Three consecutive free-looking ports for the shards (the script numbers them from a base).
    let base = loop {
        let p = free_port();
        if p < 60000 && (1..3).all(|i| std::net::TcpListener::bind(("127.0.0.1", p + i)).is_ok()) {
            break p;
        }
    };
    let proxy = free_port();
    let (base_text, proxy_text) = (base.to_string(), proxy.to_string());
    let strata = env!("CARGO_BIN_EXE_strata");
    script(&[
        "start",
        "--dir",
        &dir_text,
        "--base-port",
        &base_text,
        "--proxy-port",
        &proxy_text,
        "--strata",
        strata,
    ]);
    let _shards = Shards(dir_text.clone());
    let keys = 300;
    for i in 0..keys {
        assert_eq!(redis_cli(proxy, &["SET", &format!("key:{i}"), &format!("value-{i}")]), "OK", "key:{i}");
    }
    let on_shard_2 = redis_cli(base + 1, &["DBSIZE"]).parse::<u64>().unwrap();
    assert!(on_shard_2 > 30, "ketama gave shard 2 only {on_shard_2} of {keys} keys");
    script(&["kill-shard", "2", "--dir", &dir_text]);
    let unreachable =
        (0..keys).filter(|i| redis_cli(proxy, &["GET", &format!("key:{i}")]) != format!("value-{i}"));
    assert_eq!(
        unreachable.count() as u64,
        on_shard_2,
        "while shard 2 is down its keys fail, the others are served"
    );
    script(&["start-shard", "2", "--dir", &dir_text]);
    let deadline = Instant::now() + Duration::from_secs(10);
    for i in 0..keys {
        loop {
            let got = redis_cli(proxy, &["GET", &format!("key:{i}")]);
            if got == format!("value-{i}") {
                break;
            }
            assert!(Instant::now() < deadline, "key:{i} read back as {got:?} after the restart");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
