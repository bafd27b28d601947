//! `strata serve --durability sync` killed with SIGKILL while clients write: after a restart
//! every SET the server acknowledged is there, on every engine.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::ServerProcess;

const WRITERS: usize = 4;

/// `strata serve` on a fresh or existing store under `--durability sync`.
fn serve(dir: &std::path::Path, engine: &str) -> (ServerProcess, String) {
    let dir = dir.to_str().unwrap();
    common::serve(&[
        dir,
        "--engine",
        engine,
        "--port",
        "0",
        "--durability",
        "sync",
        "--memory-budget",
        "32MiB",
    ])
}

fn send(stream: &mut TcpStream, args: &[&str]) -> std::io::Result<Vec<u8>> {
    stream.write_all(&strata_server::resp::encode_request(args))?;
    let mut reply = Vec::new();
    let mut reader = BufReader::new(stream.try_clone()?);
    reader.read_until(b'\n', &mut reply)?;
    if reply.first() == Some(&b'$') && reply != b"$-1\r\n" {
        let len: usize = std::str::from_utf8(&reply[1..reply.len() - 2]).unwrap().parse().unwrap();
        let mut data = vec![0; len + 2];
        reader.read_exact(&mut data)?;
        data.truncate(len);
        return Ok(data);
    }
    if reply.is_empty() {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(reply)
}

/// Writes `w/<n>` = `<n>` until the connection fails (the kill); returns the acknowledged n's.
fn write_until_killed(addr: String, writer: usize) -> Vec<u64> {
    let mut stream = TcpStream::connect(&addr).unwrap();
    let mut acknowledged = Vec::new();
    for n in 0.. {
        let key = format!("w{writer}/{n}");
        match send(&mut stream, &["SET", &key, &n.to_string()]) {
            Ok(reply) if reply == b"+OK\r\n" => acknowledged.push(n),
            Ok(reply) => panic!("SET {key}: {}", String::from_utf8_lossy(&reply)),
            Err(_) => break,
        }
    }
    acknowledged
}

fn kill_while_writing_then_check(engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, addr) = serve(dir.path(), engine);
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let addr = addr.clone();
            std::thread::spawn(move || write_until_killed(addr, w))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(700));
    server.0.kill().unwrap(); // SIGKILL
    server.0.wait().unwrap();
    let acknowledged: Vec<Vec<u64>> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    let total: usize = acknowledged.iter().map(Vec::len).sum();
    assert!(total > 20, "{engine}: only {total} writes were acknowledged before the kill");
    let (mut server, addr) = serve(dir.path(), engine);
    let mut stream = TcpStream::connect(&addr).unwrap();
    for (w, ns) in acknowledged.iter().enumerate() {
        for n in ns {
            let value = send(&mut stream, &["GET", &format!("w{w}/{n}")]).unwrap();
            assert_eq!(value, n.to_string().into_bytes(), "{engine}: acknowledged SET w{w}/{n} lost");
        }
    }
    let _ = send(&mut stream, &["SHUTDOWN"]);
    assert!(server.0.wait().unwrap().success(), "{engine}: SHUTDOWN exits cleanly");
}

#[test]
fn no_acknowledged_set_is_lost_when_the_server_is_killed() {
    for engine in ["memory", "flex", "f2", "treeline", "turtle", "laser"] {
        kill_while_writing_then_check(engine);
    }
}
