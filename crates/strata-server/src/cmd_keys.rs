//! Commands on keys of any type: DEL, EXISTS, TYPE, RENAME, KEYS, SCAN, DBSIZE, FLUSHALL and the
//! expiry family.

use std::sync::atomic::Ordering;

use strata::WriteBatch;

use crate::command::{int_arg, syntax_error, CmdResult, Ctx};
use crate::glob;
use crate::keyspace::{
    is_expired, member_prefix, member_record, now_ms, Collection, Entry, Keyspace, KEY_PREFIX,
};
use crate::reply::{Reply, OK};

/// DEL / UNLINK: every key in one write batch (all gone or none, also across a crash).
pub fn del(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (ks, now) = (ctx.ks(), now_ms());
    let keys: Vec<&[u8]> = args[1..].iter().map(Vec::as_slice).collect();
    let _locks = ks.lock(&keys);
    let (mut removed, mut batch, mut stale) = (0, WriteBatch::new(), Vec::new());
    let mut seen = std::collections::HashSet::new();
    for key in keys.into_iter().filter(|k| seen.insert(*k)) {
        if let Some(old) = ks.raw_entry(key)? {
            removed += i64::from(!is_expired(old.expire_at_ms(), now));
            stale.push((key, ks.stage(&mut batch, key, Some(&old), None)));
        }
    }
    ks.commit(batch)?;
    for (key, generation) in stale {
        ks.drop_stale(key, generation)?;
    }
    Ok(Reply::Int(removed))
}

pub fn exists(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = now_ms();
    let mut count = 0;
    for key in &args[1..] {
        count += i64::from(ctx.ks().entry(key, now)?.is_some());
    }
    Ok(Reply::Int(count))
}

pub fn type_of(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let entry = ctx.ks().entry(&args[1], now_ms())?;
    Ok(Reply::Status(entry.map_or("none", |e| e.type_name()).to_string()))
}

pub fn rename(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    match transfer(ctx.ks(), &args[1], &args[2], false, false)? {
        Some(_) => Ok(OK),
        None => Err(Reply::err("no such key")),
    }
}

pub fn renamenx(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    match transfer(ctx.ks(), &args[1], &args[2], true, false)? {
        Some(done) => Ok(Reply::Int(i64::from(done))),
        None => Err(Reply::err("no such key")),
    }
}

/// COPY source destination [DB 0] [REPLACE]
pub fn copy(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let mut replace = false;
    let mut options = args[3..].iter();
    while let Some(option) = options.next() {
        match option.to_ascii_lowercase().as_slice() {
            b"replace" => replace = true,
            b"db" => {
                let db = int_arg(options.next().ok_or_else(syntax_error)?)?;
                if db != 0 {
                    return Err(Reply::err("DB index is out of range"));
                }
            }
            _ => return Err(syntax_error()),
        }
    }
    if args[1] == args[2] {
        return Err(Reply::err("source and destination objects are the same"));
    }
    let done = transfer(ctx.ks(), &args[1], &args[2], !replace, true)?;
    Ok(Reply::Int(i64::from(done == Some(true))))
}

/// Moves (or, with `keep_source`, copies) `from` to `to` with its expiry, replacing what `to`
/// held unless `only_if_absent`. `None`: `from` does not exist; `Some(false)`: `to` existed and
/// `only_if_absent` was set. A collection's members are copied under a new generation first
/// (invisible until the switch), then the keys change in one batch.
fn transfer(
    ks: &Keyspace,
    from: &[u8],
    to: &[u8],
    only_if_absent: bool,
    keep_source: bool,
) -> Result<Option<bool>, Reply> {
    let now = now_ms();
    let _locks = ks.lock(&[from, to]);
    let Some(source) = ks.entry(from, now)? else { return Ok(None) };
    if from == to {
        return Ok(Some(!only_if_absent));
    }
    let target_old = ks.raw_entry(to)?;
    if only_if_absent && target_old.as_ref().is_some_and(|e| !is_expired(e.expire_at_ms(), now)) {
        return Ok(Some(false));
    }
    let moved = match &source {
        Entry::Collection(c) => {
            let generation = ks.new_generation();
            copy_members(ks, from, c.generation, to, generation)?;
            Entry::Collection(Collection { generation, ..*c })
        }
        string => string.clone(),
    };
    let mut batch = WriteBatch::new();
    let stale_target = ks.stage(&mut batch, to, target_old.as_ref(), Some(&moved));
    let stale_source = if keep_source { None } else { ks.stage(&mut batch, from, Some(&source), None) };
    ks.commit(batch)?;
    ks.drop_stale(to, stale_target)?;
    ks.drop_stale(from, stale_source)?;
    Ok(Some(true))
}

fn copy_members(
    ks: &Keyspace,
    from: &[u8],
    generation: u64,
    to: &[u8],
    new_generation: u64,
) -> strata::Result<()> {
    let prefix = member_prefix(from, generation);
    let mut batch = WriteBatch::new();
    for item in ks.db().prefix(&prefix)? {
        let (record, value) = item?;
        batch.put(member_record(to, new_generation, &record[prefix.len()..]), value);
        if batch.len() >= 512 {
            ks.commit(std::mem::take(&mut batch))?;
        }
    }
    ks.commit(batch)
}

pub fn keys(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let ks = ctx.ks();
    ks.require_ordered("KEYS")?;
    let pattern = &args[1];
    let prefix = glob::literal_prefix(pattern);
    let mut found = Vec::new();
    ks.each_live_key(&prefix, false, now_ms(), |key, _| {
        if !key.starts_with(&prefix) {
            return false;
        }
        if glob::matches(pattern, key) {
            found.push(Reply::bulk(key.to_vec()));
        }
        true
    })?;
    Ok(Reply::Array(found))
}

/// SCAN cursor [MATCH pattern] [COUNT n] [TYPE t]
pub fn scan(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let ks = ctx.ks();
    ks.require_ordered("SCAN")?;
    let cursor: u64 = std::str::from_utf8(&args[1])
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Reply::err("invalid cursor"))?;
    let (mut pattern, mut count, mut type_name) = (None, 10usize, None);
    for option in args[2..].chunks(2) {
        let [name, value] = option else { return Err(syntax_error()) };
        match name.to_ascii_lowercase().as_slice() {
            b"match" => pattern = Some(value.clone()),
            b"count" => {
                count = usize::try_from(int_arg(value)?).ok().filter(|n| *n >= 1).ok_or_else(syntax_error)?
            }
            b"type" => type_name = Some(String::from_utf8_lossy(value).to_ascii_lowercase()),
            _ => return Err(syntax_error()),
        }
    }
    let resume = match cursor {
        0 => None,
        id => Some(ctx.server.cursors.lock().resume(id).ok_or_else(|| Reply::err("invalid cursor"))?),
    };
    let (mut found, mut visited, mut last) = (Vec::new(), 0, None);
    let start = resume.clone().unwrap_or_default();
    ks.each_live_key(&start, resume.is_some(), now_ms(), |key, entry| {
        visited += 1;
        let wanted = pattern.as_ref().is_none_or(|p| glob::matches(p, key))
            && type_name.as_ref().is_none_or(|t| t == entry.type_name());
        if wanted {
            found.push(Reply::bulk(key.to_vec()));
        }
        last = Some(key.to_vec());
        visited < count
    })?;
    let next = match last {
        Some(key) if visited >= count => ctx.server.cursors.lock().remember(key),
        _ => 0,
    };
    Ok(Reply::Array(vec![Reply::bulk(next.to_string()), Reply::Array(found)]))
}

pub fn dbsize(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let ks = ctx.ks();
    if !ks.ordered() {
        // The format record is the one engine record that is not a key.
        return match ks.db().stats()?.live_keys {
            Some(n) => Ok(Reply::Int(n.saturating_sub(1) as i64)),
            None => Err(Reply::err(format!(
                "DBSIZE needs an ordered engine or one that counts its keys; '{}' does neither",
                ks.db().kind()
            ))),
        };
    }
    let mut count = 0;
    ks.each_live_key(b"", false, now_ms(), |_, _| {
        count += 1;
        true
    })?;
    Ok(Reply::Int(count))
}

/// FLUSHALL / FLUSHDB [ASYNC|SYNC]: deletes every record but the format record, holding every
/// key's lock. Not atomic against a crash: a crash part-way leaves some keys.
pub fn flushall(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    match &args[1..] {
        [] => {}
        [mode] if mode.eq_ignore_ascii_case(b"async") || mode.eq_ignore_ascii_case(b"sync") => {}
        _ => return Err(syntax_error()),
    }
    let ks = ctx.ks();
    ks.require_ordered("FLUSHALL")?;
    ks.with_everything_locked(|| delete_everything(ks))?;
    Ok(OK)
}

fn delete_everything(ks: &Keyspace) -> strata::Result<()> {
    loop {
        let mut batch = WriteBatch::new();
        for item in ks.db().range(vec![KEY_PREFIX]..)?.take(1024) {
            batch.delete(item?.0);
        }
        let done = batch.len() < 1024;
        ks.commit(batch)?;
        if done {
            break;
        }
    }
    ks.db().flush()
}

pub fn expire(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    set_expiry(ctx, args, "ex", "expire")
}

pub fn pexpire(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    set_expiry(ctx, args, "px", "pexpire")
}

pub fn expireat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    set_expiry(ctx, args, "exat", "expireat")
}

pub fn pexpireat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    set_expiry(ctx, args, "pxat", "pexpireat")
}

/// EXPIRE key n [NX|XX|GT|LT] and its siblings. A time already past deletes the key.
fn set_expiry(ctx: &mut Ctx, args: &[Vec<u8>], unit: &str, command: &str) -> CmdResult {
    let (ks, key, now) = (ctx.ks(), &args[1], now_ms());
    let at = expiry_target(unit, &args[2], now, command)?;
    let condition = ExpiryCondition::parse(&args[3..])?;
    let _locks = ks.lock(&[key]);
    let Some(old) = ks.entry(key, now)? else { return Ok(Reply::Int(0)) };
    if !condition.allows(old.expire_at_ms(), at) {
        return Ok(Reply::Int(0));
    }
    if at <= now {
        ks.replace(key, Some(&old), None)?;
        ctx.server.counters.expired_keys.fetch_add(1, Ordering::Relaxed);
        return Ok(Reply::Int(1));
    }
    ks.replace(key, Some(&old), Some(&old.clone().with_expiry(at)))?;
    Ok(Reply::Int(1))
}

/// The absolute time (ms) an EXPIRE-family argument names; a negative or past one is allowed
/// (it deletes), an overflowing one is Redis's error.
fn expiry_target(unit: &str, arg: &[u8], now: u64, command: &str) -> Result<u64, Reply> {
    let n = int_arg(arg)?;
    let invalid = || Reply::err(format!("invalid expire time in '{command}' command"));
    let ms = if unit.starts_with("ex") { n.checked_mul(1000).ok_or_else(invalid)? } else { n };
    let at = if unit.ends_with("at") { ms } else { ms.checked_add(now as i64).ok_or_else(invalid)? };
    Ok(at.max(1) as u64)
}

/// EXPIRE's NX / XX / GT / LT (XX combines with GT or LT).
#[derive(Default)]
struct ExpiryCondition {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

impl ExpiryCondition {
    fn parse(args: &[Vec<u8>]) -> Result<ExpiryCondition, Reply> {
        let mut c = ExpiryCondition::default();
        for arg in args {
            match arg.to_ascii_lowercase().as_slice() {
                b"nx" => c.nx = true,
                b"xx" => c.xx = true,
                b"gt" => c.gt = true,
                b"lt" => c.lt = true,
                _ => return Err(Reply::err(format!("Unsupported option {}", String::from_utf8_lossy(arg)))),
            }
        }
        if c.nx && (c.xx || c.gt || c.lt) {
            return Err(Reply::err("NX and XX, GT or LT options at the same time are not compatible"));
        }
        if c.gt && c.lt {
            return Err(Reply::err("GT and LT options at the same time are not compatible"));
        }
        Ok(c)
    }

    /// Whether a key expiring at `current` (0: never) may be set to expire at `at`. No expiry
    /// counts as an infinite one.
    fn allows(&self, current: u64, at: u64) -> bool {
        let has_ttl = current != 0;
        !(self.nx && has_ttl
            || self.xx && !has_ttl
            || self.gt && (!has_ttl || at <= current)
            || self.lt && has_ttl && at >= current)
    }
}

fn remaining(ctx: &mut Ctx, key: &[u8], reply: impl Fn(u64, u64) -> i64) -> CmdResult {
    let now = now_ms();
    Ok(Reply::Int(match ctx.ks().entry(key, now)? {
        None => -2,
        Some(e) if e.expire_at_ms() == 0 => -1,
        Some(e) => reply(e.expire_at_ms(), now),
    }))
}

pub fn ttl(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    remaining(ctx, &args[1], |at, now| ((at - now + 500) / 1000) as i64)
}

pub fn pttl(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    remaining(ctx, &args[1], |at, now| (at - now) as i64)
}

pub fn expiretime(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    remaining(ctx, &args[1], |at, _| (at / 1000) as i64)
}

pub fn pexpiretime(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    remaining(ctx, &args[1], |at, _| at as i64)
}

pub fn persist(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (ks, key, now) = (ctx.ks(), &args[1], now_ms());
    let _locks = ks.lock(&[key]);
    match ks.entry(key, now)? {
        Some(old) if old.expire_at_ms() != 0 => {
            ks.replace(key, Some(&old), Some(&old.clone().with_expiry(0)))?;
            Ok(Reply::Int(1))
        }
        _ => Ok(Reply::Int(0)),
    }
}

/// RANDOMKEY: the first live key at or after a random point of the key space (wrapping to the
/// first key): every key can come up, though not with equal chances.
pub fn randomkey(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let ks = ctx.ks();
    ks.require_ordered("RANDOMKEY")?;
    let point: [u8; 8] = rand::random();
    let now = now_ms();
    for start in [&point[..], b""] {
        let mut found = None;
        ks.each_live_key(start, false, now, |key, _| {
            found = Some(key.to_vec());
            false
        })?;
        if let Some(key) = found {
            return Ok(Reply::Bulk(key));
        }
    }
    Ok(Reply::Nil)
}

/// MEMORY USAGE key [SAMPLES n]: the bytes of the key's records (a collection's estimated from
/// up to `n` members, 5 by default; 0 reads them all).
pub fn memory(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if !args[1].eq_ignore_ascii_case(b"usage") || args.len() < 3 {
        return Err(Reply::err("MEMORY supports only USAGE here"));
    }
    let samples = match &args[3..] {
        [] => 5,
        [word, n] if word.eq_ignore_ascii_case(b"samples") => int_arg(n)?.max(0) as usize,
        _ => return Err(syntax_error()),
    };
    let (ks, key) = (ctx.ks(), &args[2]);
    let Some(entry) = ks.entry(key, now_ms())? else { return Ok(Reply::Nil) };
    let record_bytes = (1 + key.len() + entry.encode().len()) as i64;
    let Entry::Collection(c) = entry else { return Ok(Reply::Int(record_bytes)) };
    let limit = if samples == 0 { usize::MAX } else { samples };
    let prefix = member_prefix(key, c.generation);
    let (mut seen, mut bytes) = (0i64, 0i64);
    for item in ks.db().prefix(&prefix)?.take(limit) {
        let (record, value) = item?;
        seen += 1;
        bytes += (record.len() + value.len()) as i64;
    }
    let members = if seen == 0 { 0 } else { bytes / seen * c.len as i64 };
    Ok(Reply::Int(record_bytes + members))
}
