//! A server on a free loopback port over a temporary store, and a minimal blocking RESP client.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread::JoinHandle;
use std::time::Duration;

use strata::{Db, EngineKind, Options};
use strata_server::{ServeConfig, Server, ShutdownHandle};

/// A running server; `stop` shuts it down and returns `run`'s result.
pub struct Running {
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
    handle: ShutdownHandle,
    thread: Option<JoinHandle<strata::Result<()>>>,
}

impl Running {
    pub fn start(kind: EngineKind) -> Running {
        Running::start_with(kind, ServeConfig { port: 0, ..ServeConfig::default() })
    }

    pub fn start_with(kind: EngineKind, config: ServeConfig) -> Running {
        let dir = tempfile::tempdir().unwrap();
        Running::start_in(dir, kind, config)
    }

    pub fn start_in(dir: tempfile::TempDir, kind: EngineKind, config: ServeConfig) -> Running {
        let db = Db::open(dir.path(), Options::new(kind).memory_budget_bytes(32 << 20)).unwrap();
        let server = Server::bind(db, config).unwrap();
        let addr = server.local_addr();
        let handle = server.shutdown_handle();
        let thread = std::thread::spawn(move || server.run());
        Running { addr, dir, handle, thread: Some(thread) }
    }

    pub fn client(&self) -> Client {
        Client::connect(self.addr)
    }

    /// Stops the server and waits for it; the store is closed when this returns.
    pub fn stop(mut self) -> (strata::Result<()>, tempfile::TempDir) {
        self.handle.shutdown();
        let result = self.thread.take().unwrap().join().unwrap();
        let dir = tempfile::TempDir::new().unwrap();
        (result, std::mem::replace(&mut self.dir, dir))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.handle.shutdown();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A decoded reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
    Double(String),
}

impl Value {
    pub fn bulk(text: &str) -> Value {
        Value::Bulk(text.as_bytes().to_vec())
    }

    pub fn ok() -> Value {
        Value::Status("OK".into())
    }

    pub fn error_text(&self) -> &str {
        match self {
            Value::Error(e) => e,
            other => panic!("expected an error, got {other:?}"),
        }
    }
}

pub struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Client { reader: BufReader::new(stream.try_clone().unwrap()), writer: stream }
    }

    pub fn encode(args: &[&[u8]]) -> Vec<u8> {
        strata_server::resp::encode_request(args)
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
    }

    /// Sends `bytes` until they are all sent or one write waits `patience`; returns how many
    /// were sent.
    pub fn send_until_stalled(&mut self, bytes: &[u8], patience: Duration) -> usize {
        self.writer.set_write_timeout(Some(patience)).unwrap();
        let mut sent = 0;
        while sent < bytes.len() {
            match self.writer.write(&bytes[sent..]) {
                Ok(n) => sent += n,
                Err(e)
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) =>
                {
                    break
                }
                Err(e) => panic!("send: {e}"),
            }
        }
        self.writer.set_write_timeout(None).unwrap();
        sent
    }

    /// Sends one command (words split on spaces) and reads its reply.
    pub fn cmd(&mut self, line: &str) -> Value {
        let words: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        self.call(&words)
    }

    pub fn call(&mut self, args: &[&[u8]]) -> Value {
        self.send_raw(&Client::encode(args));
        self.read()
    }

    /// The next reply; `None` if the server closed the connection.
    pub fn try_read(&mut self) -> Option<Value> {
        let mut line = String::new();
        if self.reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end_matches("\r\n");
        let (kind, rest) = line.split_at(1);
        Some(match kind {
            "+" => Value::Status(rest.into()),
            "-" => Value::Error(rest.into()),
            ":" => Value::Int(rest.parse().unwrap()),
            "," => Value::Double(rest.into()),
            "_" => Value::Nil,
            "$" if rest == "-1" => Value::Nil,
            "*" if rest == "-1" => Value::Nil,
            "$" => {
                let mut data = vec![0; rest.parse::<usize>().unwrap() + 2];
                self.reader.read_exact(&mut data).unwrap();
                data.truncate(data.len() - 2);
                Value::Bulk(data)
            }
            "*" => Value::Array((0..rest.parse::<usize>().unwrap()).map(|_| self.read()).collect()),
            "%" => {
                Value::Map((0..rest.parse::<usize>().unwrap()).map(|_| (self.read(), self.read())).collect())
            }
            other => panic!("unexpected reply type {other:?} in {line:?}"),
        })
    }

    pub fn read(&mut self) -> Value {
        self.try_read().expect("the server closed the connection")
    }
}
