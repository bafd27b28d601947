//! `strata serve` end to end over TCP: every engine, pipelining, authentication, protocol
//! errors, limits, expiry, transactions and shutdown.

mod common;

use std::time::{Duration, Instant};

use common::{Client, Running, Value};
use strata::{Db, EngineKind, Options};
use strata_server::keyspace::key_record;
use strata_server::ServeConfig;

fn bulk(text: &str) -> Value {
    Value::bulk(text)
}

#[test]
fn every_engine_serves_strings_and_names_what_it_cannot_do() {
    for kind in EngineKind::ALL {
        let server = Running::start(kind);
        let mut c = server.client();
        assert_eq!(c.cmd("SET greeting hello"), Value::ok(), "{kind}");
        assert_eq!(c.cmd("GET greeting"), bulk("hello"), "{kind}");
        assert_eq!(c.cmd("INCRBY counter 41"), Value::Int(41), "{kind}");
        assert_eq!(c.cmd("INCR counter"), Value::Int(42), "{kind}");
        assert_eq!(c.cmd("MSET a 1 b 2"), Value::ok(), "{kind}");
        assert_eq!(c.cmd("MGET a b missing"), Value::Array(vec![bulk("1"), bulk("2"), Value::Nil]), "{kind}");
        assert_eq!(c.cmd("DEL a b missing"), Value::Int(2), "{kind}");
        assert_eq!(c.cmd("APPEND greeting !"), Value::Int(6), "{kind}");
        if kind == EngineKind::F2 {
            assert!(c.cmd("KEYS *").error_text().contains("ordered engine"), "{kind}");
            assert!(c.cmd("HSET h f v").error_text().contains("ordered engine"), "{kind}");
        } else {
            assert_eq!(c.cmd("KEYS *"), Value::Array(vec![bulk("counter"), bulk("greeting")]), "{kind}");
            assert_eq!(c.cmd("HSET h f1 v1 f2 v2"), Value::Int(2), "{kind}");
            assert_eq!(
                c.cmd("HGETALL h"),
                Value::Array(vec![bulk("f1"), bulk("v1"), bulk("f2"), bulk("v2")])
            );
            assert_eq!(c.cmd("DBSIZE"), Value::Int(3), "{kind}");
        }
        assert!(c.cmd("NOSUCH x").error_text().starts_with("ERR unknown command 'NOSUCH'"));
        let (closed, _dir) = server.stop();
        closed.unwrap();
    }
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let server = Running::start(EngineKind::Memory);
    let mut c = server.client();
    let mut pipeline = Vec::new();
    for _ in 0..2000 {
        pipeline.extend(Client::encode(&[b"INCR", b"n"]));
    }
    pipeline.extend(b"PING\r\n");
    c.send_raw(&pipeline);
    for expected in 1..=2000 {
        assert_eq!(c.read(), Value::Int(expected));
    }
    assert_eq!(c.read(), Value::Status("PONG".into()));
}

#[test]
fn with_a_password_every_command_but_auth_is_refused_until_authenticated() {
    let config = ServeConfig { port: 0, requirepass: Some(b"s3cret".to_vec()), ..ServeConfig::default() };
    let server = Running::start_with(EngineKind::Memory, config);
    let mut c = server.client();
    assert!(c.cmd("GET k").error_text().starts_with("NOAUTH"));
    assert!(c.cmd("AUTH wrong").error_text().starts_with("WRONGPASS"));
    // An unauthenticated client cannot make the server buffer a large request.
    let mut big = server.client();
    big.send_raw(b"*1\r\n$100000000\r\n");
    assert!(big.read().error_text().contains("unauthenticated bulk length"));
    assert_eq!(big.try_read(), None, "closed after a protocol error");
    assert_eq!(c.cmd("AUTH s3cret"), Value::ok());
    assert_eq!(c.cmd("SET k v"), Value::ok());
    assert_eq!(c.cmd("GET k"), bulk("v"));
}

/// Valkey's unit/auth.tcl, whose every test is `external:skip` (it starts its own servers):
/// each of its assertions that needs no replica, against `strata serve`.
#[test]
fn valkey_auth_tcl_assertions_hold() {
    let open = Running::start(EngineKind::Memory);
    let mut c = open.client();
    let no_password = c.cmd("AUTH foo");
    assert!(no_password.error_text().starts_with("ERR") && no_password.error_text().contains("any password"));
    assert!(c.cmd("AUTH a b c").error_text().contains("syntax error"));
    // Binary passwords (the `auth_binary_password` block).
    assert_eq!(c.call(&[b"CONFIG", b"SET", b"requirepass", b"abc\x00def"]), Value::ok());
    let mut other = open.client();
    assert!(other.cmd("AUTH abc").error_text().starts_with("WRONGPASS"));
    assert_eq!(other.call(&[b"AUTH", b"abc\x00def"]), Value::ok());

    let config = ServeConfig { port: 0, requirepass: Some(b"foobar".to_vec()), ..ServeConfig::default() };
    let server = Running::start_with(EngineKind::Memory, config);
    let mut c = server.client();
    assert!(c.cmd("AUTH wrong!").error_text().starts_with("WRONGPASS"));
    assert!(c.cmd("SET foo bar").error_text().starts_with("NOAUTH"));
    assert_eq!(c.cmd("AUTH foobar"), Value::ok());
    assert_eq!(c.cmd("SET foo 100"), Value::ok());
    assert_eq!(c.cmd("INCR foo"), Value::Int(101));
    for (request, expected) in [
        (&b"*100\r\n"[..], "unauthenticated multibulk length"),
        (b"*1\r\n$100000000\r\n", "unauthenticated bulk length"),
    ] {
        let mut anonymous = server.client();
        anonymous.send_raw(request);
        assert!(anonymous.read().error_text().contains(expected), "{expected}");
    }
}

#[test]
fn a_malformed_request_is_answered_and_closes_only_its_connection() {
    let server = Running::start(EngineKind::Memory);
    let mut bystander = server.client();
    assert_eq!(bystander.cmd("SET k v"), Value::ok());
    let cases: [(&[u8], &str); 4] = [
        (b"*3000000000\r\n", "invalid multibulk length"),
        (b"*1\r\n$-10\r\n", "invalid bulk length"),
        (b"*2\r\n$3\r\nGET\r\nxx\r\n", "expected '$'"),
        (b"GET \"unbalanced\r\n", "unbalanced quotes"),
    ];
    for (input, expected) in cases {
        let mut c = server.client();
        c.send_raw(input);
        assert!(c.read().error_text().contains(expected), "{expected}");
        assert_eq!(c.try_read(), None, "{expected}: the connection closes");
    }
    assert_eq!(bystander.cmd("GET k"), bulk("v"));
}

#[test]
fn an_argument_above_the_bulk_limit_is_refused() {
    let config = ServeConfig { port: 0, proto_max_bulk_len: 1 << 20, ..ServeConfig::default() };
    let server = Running::start_with(EngineKind::Memory, config);
    let mut c = server.client();
    c.send_raw(format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", (1 << 20) + 1).as_bytes());
    assert!(c.read().error_text().contains("invalid bulk length"));
    let value = "x".repeat(1 << 20);
    let mut c = server.client();
    assert_eq!(c.call(&[b"SET", b"k", value.as_bytes()]), Value::ok());
}

#[test]
fn a_value_the_engine_cannot_hold_gets_an_error_not_a_crash() {
    let server = Running::start(EngineKind::F2);
    let mut c = server.client();
    let huge = vec![b'x'; 64 << 20];
    let reply = c.call(&[b"SET", b"k", &huge]);
    assert!(reply.error_text().contains("too large"), "{reply:?}");
    assert!(c.cmd("SETRANGE k 9223372036854775807 A").error_text().contains("maximum allowed size"));
    assert_eq!(c.cmd("PING"), Value::Status("PONG".into()));
}

#[test]
fn expired_keys_read_as_absent_and_the_sweep_deletes_their_records() {
    let server = Running::start(EngineKind::Memory);
    let mut c = server.client();
    assert_eq!(c.cmd("SET short v PX 100"), Value::ok());
    assert_eq!(c.cmd("SET long v EX 100"), Value::ok());
    assert_eq!(c.cmd("HSET h f v"), Value::Int(1));
    assert_eq!(c.cmd("PEXPIRE h 100"), Value::Int(1));
    let ttl = c.cmd("TTL long");
    assert!(matches!(ttl, Value::Int(99 | 100)), "{ttl:?}");
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(c.cmd("GET short"), Value::Nil);
    assert_eq!(c.cmd("HGET h f"), Value::Nil);
    let deadline = Instant::now() + Duration::from_secs(5);
    let (closed, dir) = loop {
        let info = c.cmd("INFO stats");
        let Value::Bulk(text) = info else { panic!() };
        if String::from_utf8_lossy(&text).contains("expired_keys:2") || Instant::now() > deadline {
            break server.stop();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    closed.unwrap();
    let db = Db::open(dir.path(), Options::existing()).unwrap();
    assert_eq!(db.get(key_record(b"short")).unwrap(), None, "the sweep deleted the record");
    assert_eq!(db.get(key_record(b"h")).unwrap(), None);
    assert!(db.get(key_record(b"long")).unwrap().is_some());
    // Nothing but the long key, its expiry index entry and the format record is left.
    assert_eq!(db.iter().unwrap().count(), 3);
}

#[test]
fn shutdown_flushes_writes_made_without_durability() {
    let config = ServeConfig { port: 0, durability: strata::Durability::None, ..ServeConfig::default() };
    let server = Running::start_with(EngineKind::Memory, config);
    let mut c = server.client();
    for i in 0..100 {
        assert_eq!(c.cmd(&format!("SET k{i} v{i}")), Value::ok());
    }
    c.send_raw(&Client::encode(&[b"SHUTDOWN"]));
    assert_eq!(c.try_read(), None, "SHUTDOWN closes without a reply");
    let (closed, dir) = server.stop();
    closed.unwrap();
    let config = ServeConfig { port: 0, ..ServeConfig::default() };
    let server = Running::start_in(dir, EngineKind::Memory, config);
    let mut c = server.client();
    for i in 0..100 {
        assert_eq!(c.cmd(&format!("GET k{i}")), bulk(&format!("v{i}")));
    }
}

#[test]
fn the_client_beyond_maxclients_is_refused_and_idle_clients_are_closed() {
    let config = ServeConfig { port: 0, maxclients: 2, timeout_secs: 1, ..ServeConfig::default() };
    let server = Running::start_with(EngineKind::Memory, config);
    let (mut a, mut b) = (server.client(), server.client());
    assert_eq!(a.cmd("PING"), Value::Status("PONG".into()));
    assert_eq!(b.cmd("PING"), Value::Status("PONG".into()));
    let mut third = server.client();
    assert!(third.read().error_text().contains("max number of clients"));
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(a.try_read(), None, "an idle client is closed after the timeout");
    let mut fresh = server.client();
    assert_eq!(fresh.cmd("PING"), Value::Status("PONG".into()));
}

#[test]
fn a_transaction_runs_whole_and_a_refused_command_discards_it() {
    let server = Running::start(EngineKind::Memory);
    let mut c = server.client();
    assert_eq!(c.cmd("MULTI"), Value::ok());
    assert_eq!(c.cmd("INCR n"), Value::Status("QUEUED".into()));
    assert_eq!(c.cmd("INCR n"), Value::Status("QUEUED".into()));
    assert_eq!(c.cmd("EXEC"), Value::Array(vec![Value::Int(1), Value::Int(2)]));
    assert_eq!(c.cmd("MULTI"), Value::ok());
    assert_eq!(c.cmd("INCR n"), Value::Status("QUEUED".into()));
    assert!(c.cmd("GET").error_text().contains("wrong number of arguments"));
    assert!(c.cmd("EXEC").error_text().starts_with("EXECABORT"));
    assert_eq!(c.cmd("GET n"), bulk("2"));
}

#[test]
fn msetnx_sets_all_or_none_and_rename_moves_a_hash_with_its_expiry() {
    let server = Running::start(EngineKind::Treeline);
    let mut c = server.client();
    assert_eq!(c.cmd("MSETNX a 1 b 2"), Value::Int(1));
    assert_eq!(c.cmd("MSETNX b 3 c 4"), Value::Int(0));
    assert_eq!(c.cmd("MGET a b c"), Value::Array(vec![bulk("1"), bulk("2"), Value::Nil]));
    assert_eq!(c.cmd("HSET h f1 v1 f2 v2"), Value::Int(2));
    assert_eq!(c.cmd("EXPIRE h 1000"), Value::Int(1));
    assert_eq!(c.cmd("RENAME h g"), Value::ok());
    assert_eq!(c.cmd("HGETALL h"), Value::Array(vec![]));
    assert_eq!(c.cmd("HGETALL g"), Value::Array(vec![bulk("f1"), bulk("v1"), bulk("f2"), bulk("v2")]));
    assert!(matches!(c.cmd("TTL g"), Value::Int(999 | 1000)));
    assert_eq!(c.cmd("SET g now-a-string"), Value::ok());
    assert_eq!(c.cmd("TYPE g"), Value::Status("string".into()));
    assert_eq!(c.cmd("TTL g"), Value::Int(-1));
}

#[test]
fn scan_returns_every_key_present_throughout_exactly_once_despite_writes() {
    let server = Running::start(EngineKind::Memory);
    let mut c = server.client();
    for i in 0..500 {
        assert_eq!(c.cmd(&format!("SET key:{i:03} v")), Value::ok());
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut cursor = "0".to_string();
    let mut round = 0;
    loop {
        let Value::Array(reply) = c.cmd(&format!("SCAN {cursor} COUNT 37")) else { panic!() };
        let [Value::Bulk(next), Value::Array(keys)] = &reply[..] else { panic!("{reply:?}") };
        for key in keys {
            let Value::Bulk(key) = key else { panic!() };
            assert!(seen.insert(key.clone()), "returned twice: {key:?}");
        }
        // Writes between calls: new keys and deleted ones.
        round += 1;
        c.cmd(&format!("SET new:{round} v"));
        c.cmd(&format!("DEL key:{:03}", 499 - round));
        cursor = String::from_utf8(next.clone()).unwrap();
        if cursor == "0" {
            break;
        }
    }
    for i in 0..(499 - round) {
        assert!(seen.contains(format!("key:{i:03}").as_bytes()), "key:{i:03} missing");
    }
}

#[test]
fn hello_3_switches_the_connection_to_resp3() {
    let server = Running::start(EngineKind::Flex);
    let mut c = server.client();
    let Value::Map(hello) = c.cmd("HELLO 3") else { panic!() };
    assert!(hello.contains(&(bulk("proto"), Value::Int(3))));
    assert_eq!(c.cmd("GET missing"), Value::Nil);
    c.cmd("HSET h f v");
    assert_eq!(c.cmd("HGETALL h"), Value::Map(vec![(bulk("f"), bulk("v"))]));
    assert!(c.cmd("HELLO 4").error_text().starts_with("NOPROTO"));
}

/// The calls of YCSB's Redis binding (site.ycsb.db.RedisClient): a hash per record, a sorted
/// set `_indices` of key hashes for scans.
#[test]
fn ycsbs_redis_binding_shape_works_insert_read_update_scan_delete() {
    let server = Running::start(EngineKind::Turtle);
    let mut c = server.client();
    for i in 0..20 {
        let key = format!("user{i:02}");
        assert_eq!(c.cmd(&format!("HMSET {key} field0 a{i} field1 b{i}")), Value::ok());
        assert_eq!(c.cmd(&format!("ZADD _indices {} {key}", i * 10)), Value::Int(1));
    }
    assert_eq!(c.cmd("HMGET user03 field1 nosuch"), Value::Array(vec![bulk("b3"), Value::Nil]));
    assert_eq!(c.cmd("HMSET user03 field1 updated"), Value::ok());
    assert_eq!(c.cmd("HGET user03 field1"), bulk("updated"));
    let scan = c.cmd("ZRANGEBYSCORE _indices 50 +inf LIMIT 0 3");
    assert_eq!(scan, Value::Array(vec![bulk("user05"), bulk("user06"), bulk("user07")]));
    assert_eq!(
        c.cmd("ZRANGEBYSCORE _indices (50 60 WITHSCORES"),
        Value::Array(vec![bulk("user06"), bulk("60")])
    );
    assert_eq!(c.cmd("DEL user05"), Value::Int(1));
    assert_eq!(c.cmd("ZREM _indices user05"), Value::Int(1));
    assert_eq!(c.cmd("ZRANGEBYSCORE _indices 50 +inf LIMIT 0 1"), Value::Array(vec![bulk("user06")]));
    assert_eq!(c.cmd("ZCARD _indices"), Value::Int(19));
    assert_eq!(c.cmd("ZADD _indices 5 user06"), Value::Int(0), "a new score for a member adds nothing");
    assert_eq!(c.cmd("ZRANGE _indices 0 1"), Value::Array(vec![bulk("user00"), bulk("user06")]));
    assert_eq!(c.cmd("ZSCORE _indices user06"), bulk("5"));
}

/// More clients waiting in BLPOP than the server has workers (one per core) must not hold up
/// anyone else, and a push wakes them.
#[test]
fn clients_waiting_in_blpop_do_not_hold_up_other_clients() {
    let server = Running::start(EngineKind::Memory);
    let waiters: Vec<_> = (0..4)
        .map(|i| {
            let mut c = server.client();
            c.send_raw(&Client::encode(&[b"BLPOP", format!("queue{i}").as_bytes(), b"10"]));
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let mut other = server.client();
    let started = Instant::now();
    assert_eq!(other.cmd("SET k v"), Value::ok());
    assert_eq!(other.cmd("GET k"), bulk("v"));
    assert!(started.elapsed() < Duration::from_secs(2), "served while others wait");
    for (i, mut waiter) in waiters.into_iter().enumerate() {
        assert_eq!(other.cmd(&format!("RPUSH queue{i} item{i}")), Value::Int(1));
        let expected = Value::Array(vec![bulk(&format!("queue{i}")), bulk(&format!("item{i}"))]);
        assert_eq!(waiter.read(), expected);
    }
}

/// Requests pipelined after a BLPOP that waits run after it is answered, in order, as in Redis.
#[test]
fn a_pipeline_after_a_waiting_blpop_runs_once_the_pop_is_served() {
    let server = Running::start(EngineKind::Memory);
    let mut waiter = server.client();
    waiter.send_raw(b"BLPOP q 10\r\nSET after-pop 1\r\nGET after-pop\r\n");
    let mut other = server.client();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(other.cmd("GET after-pop"), Value::Nil, "the SET waits behind the pop");
    let pushed = Instant::now();
    assert_eq!(other.cmd("RPUSH q x"), Value::Int(1));
    assert_eq!(waiter.read(), Value::Array(vec![bulk("q"), bulk("x")]));
    assert!(pushed.elapsed() < Duration::from_secs(5));
    assert_eq!(waiter.read(), Value::ok());
    assert_eq!(waiter.read(), bulk("1"));
    assert_eq!(other.cmd("LLEN q"), Value::Int(0));
}

/// A client that leaves while blocked in BLPOP (timeout 0: for ever) is gone at once, not
/// when a push or the timeout would have woken it.
#[test]
fn a_client_that_leaves_while_blocked_is_disconnected() {
    let server = Running::start(EngineKind::Memory);
    let mut other = server.client();
    let clients = |c: &mut Client| -> String {
        let Value::Bulk(info) = c.cmd("INFO clients") else { panic!("INFO clients") };
        let text = String::from_utf8(info).unwrap();
        text.lines().find_map(|l| l.strip_prefix("connected_clients:")).unwrap().trim().to_string()
    };
    let mut waiter = server.client();
    waiter.send_raw(b"BLPOP never 0\r\n");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(clients(&mut other), "2");
    drop(waiter);
    let started = Instant::now();
    while clients(&mut other) != "1" {
        assert!(started.elapsed() < Duration::from_secs(5), "the blocked client's leaving went unnoticed");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A client blocked in BLPOP that keeps sending is held back by its socket, not buffered by
/// the server without bound; its requests run once the pop is answered.
#[test]
fn a_blocked_client_that_keeps_sending_is_held_back() {
    let server = Running::start(EngineKind::Memory);
    let mut waiter = server.client();
    waiter.send_raw(b"BLPOP list 0\r\n");
    std::thread::sleep(Duration::from_millis(100));
    let pings = b"PING\r\n".repeat(128 << 20 >> 3);
    let sent = waiter.send_until_stalled(&pings, Duration::from_secs(2));
    // The kernel's socket buffers hold a few tens of MiB at most (tcp_rmem + tcp_wmem).
    assert!(sent < 64 << 20, "the server took {sent} bytes from a blocked client");
    let mut other = server.client();
    assert_eq!(other.cmd("LPUSH list x"), Value::Int(1));
    assert_eq!(waiter.read(), Value::Array(vec![Value::Bulk(b"list".to_vec()), Value::Bulk(b"x".to_vec())]));
    assert_eq!(waiter.read(), Value::Status("PONG".into()));
}

/// Found by the `server_requests` fuzz target: the expiry sweep read the expiry index with a
/// range scan, which `f2` (hash-indexed) refuses; it must do nothing there instead.
#[test]
fn the_expiry_sweep_on_an_unordered_engine_does_nothing() {
    let storage = std::sync::Arc::new(strata::storage::MemStorage::new());
    let db = Db::open("mem", Options::new(EngineKind::F2).storage(storage)).unwrap();
    let replies = strata_server::fuzzing::serve_bytes(db, b"SET k v PX 1\r\nGET k\r\n").unwrap();
    assert!(replies.starts_with(b"+OK\r\n"), "{}", String::from_utf8_lossy(&replies));
}

/// Eight clients on four workers pipeline increments of shared keys in opposite orders, MSETs
/// over several of them and transactions: every increment lands once (the key locks keep each
/// command atomic while they linger through pipelines) and no pipeline deadlocks (a stuck one
/// fails its client's 30 s read timeout).
#[test]
fn concurrent_pipelines_on_shared_keys_lose_no_increment() {
    let config = ServeConfig { port: 0, worker_threads: 4, ..ServeConfig::default() };
    let server = Running::start_with(EngineKind::Memory, config);
    const CLIENTS: usize = 8;
    const PIPELINES: usize = 150;
    let keys = ["a", "b", "c", "d"];
    let threads: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let mut c = server.client();
            std::thread::spawn(move || {
                for round in 0..PIPELINES {
                    // Odd clients take the keys in the reverse order.
                    let order: Vec<&str> =
                        if client % 2 == 0 { keys.to_vec() } else { keys.iter().rev().copied().collect() };
                    let mut pipeline = Vec::new();
                    for k in &order {
                        pipeline.extend(Client::encode(&[b"INCR", k.as_bytes()]));
                    }
                    let (first, last) = if client % 2 == 0 { (b"x", b"z") } else { (b"z", b"x") };
                    pipeline.extend(Client::encode(&[b"MSET", first, b"1", b"y", b"2", last, b"3"]));
                    pipeline.extend(Client::encode(&[b"INCR", order[0].as_bytes()]));
                    if round % 10 == 0 {
                        for part in [&[&b"MULTI"[..]][..], &[b"INCR", b"t"], &[b"INCR", b"t"], &[b"EXEC"]] {
                            pipeline.extend(Client::encode(part));
                        }
                    }
                    c.send_raw(&pipeline);
                    let replies = order.len() + 2 + if round % 10 == 0 { 4 } else { 0 };
                    for _ in 0..replies {
                        if let Value::Error(e) = c.read() {
                            panic!("client {client}: {e}");
                        }
                    }
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let mut c = server.client();
    let total_t = CLIENTS * PIPELINES.div_ceil(10) * 2;
    assert_eq!(c.cmd("GET t"), bulk(&total_t.to_string()), "an increment inside EXEC was lost");
    // Each pipeline increments every key once and its first key (a or d) once more.
    let (once, twice) = (CLIENTS * PIPELINES, CLIENTS * PIPELINES * 3 / 2);
    for (k, n) in [("a", twice), ("b", once), ("c", once), ("d", twice)] {
        assert_eq!(c.cmd(&format!("GET {k}")), bulk(&n.to_string()), "key {k}");
    }
}
