//! Hashes as composite keys: a key record holding the field count and a generation, and one
//! record per field (docs/format/server-records.md). Ordered engines only: HGETALL is a prefix
//! scan.

use strata::WriteBatch;

use crate::command::{float_arg, int_arg, parse_float, parse_int, wrong_type, CmdResult, Ctx};
use crate::keyspace::{field_prefix, field_record, is_expired, now_ms, Entry, Keyspace};
use crate::reply::{format_double, Reply, OK};

/// A live hash's generation and field count.
struct Hash {
    expire_at_ms: u64,
    generation: u64,
    fields: u64,
}

fn require_ordered(ks: &Keyspace) -> Result<(), Reply> {
    if ks.ordered() {
        return Ok(());
    }
    Err(Reply::err(format!(
        "hashes need an ordered engine; '{}' is hash-indexed (use a string per field)",
        ks.db().kind()
    )))
}

/// The live hash at `key`, `None` if absent; WRONGTYPE if it holds a string.
fn live_hash(ks: &Keyspace, key: &[u8], now: u64) -> Result<Option<Hash>, Reply> {
    require_ordered(ks)?;
    match ks.entry(key, now)? {
        None => Ok(None),
        Some(Entry::Hash { expire_at_ms, generation, fields }) => {
            Ok(Some(Hash { expire_at_ms, generation, fields }))
        }
        Some(_) => Err(wrong_type()),
    }
}

fn field(ks: &Keyspace, key: &[u8], hash: &Hash, name: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
    Ok(ks.db().get(field_record(key, hash.generation, name))?)
}

/// Runs `change` on the hash at `key` (created empty if absent) under the key's lock, then writes
/// its field records and the key record in one batch. `change` returns its reply and the
/// change in field count; a hash left with no fields is deleted.
fn modify(
    ks: &Keyspace,
    key: &[u8],
    change: impl FnOnce(&Hash, &mut WriteBatch) -> Result<(Reply, i64), Reply>,
) -> CmdResult {
    require_ordered(ks)?;
    let now = now_ms();
    let _locks = ks.lock(&[key]);
    let old = ks.raw_entry(key)?;
    let hash = match old.as_ref().filter(|e| !is_expired(e.expire_at_ms(), now)) {
        None => Hash { expire_at_ms: 0, generation: ks.new_generation(), fields: 0 },
        Some(Entry::Hash { expire_at_ms, generation, fields }) => {
            Hash { expire_at_ms: *expire_at_ms, generation: *generation, fields: *fields }
        }
        Some(_) => return Err(wrong_type()),
    };
    let mut batch = WriteBatch::new();
    let (reply, added) = change(&hash, &mut batch)?;
    let fields = (hash.fields as i64 + added).max(0) as u64;
    let new = Entry::Hash { expire_at_ms: hash.expire_at_ms, generation: hash.generation, fields };
    if batch.is_empty() {
        return Ok(reply);
    }
    let stale = ks.stage(&mut batch, key, old.as_ref(), (fields > 0).then_some(&new));
    ks.commit(batch)?;
    ks.drop_stale(key, stale)?;
    Ok(reply)
}

fn set_fields(ctx: &mut Ctx, args: &[Vec<u8>], only_new: bool) -> Result<i64, Reply> {
    if !args.len().is_multiple_of(2) {
        return Err(Reply::err(format!(
            "wrong number of arguments for '{}' command",
            String::from_utf8_lossy(&args[0]).to_lowercase()
        )));
    }
    let (ks, key) = (ctx.ks(), &args[1]);
    let mut added = 0;
    modify(ks, key, |hash, batch| {
        let mut seen = std::collections::HashSet::new();
        for pair in args[2..].chunks(2) {
            let exists = field(ks, key, hash, &pair[0])?.is_some();
            let first_time = seen.insert(pair[0].as_slice());
            if exists && only_new {
                continue;
            }
            added += i64::from(!exists && first_time);
            batch.put(field_record(key, hash.generation, &pair[0]), pair[1].clone());
        }
        Ok((OK, added))
    })?;
    Ok(added)
}

pub fn hset(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    set_fields(ctx, args, false).map(Reply::Int)
}

pub fn hmset(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    set_fields(ctx, args, false).map(|_| OK)
}

pub fn hsetnx(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    set_fields(ctx, args, true).map(Reply::Int)
}

pub fn hget(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let ks = ctx.ks();
    let value = match live_hash(ks, &args[1], now_ms())? {
        Some(hash) => field(ks, &args[1], &hash, &args[2])?,
        None => None,
    };
    ctx.server.counters.hit_or_miss(value.is_some());
    Ok(Reply::optional(value))
}

pub fn hmget(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (ks, key) = (ctx.ks(), &args[1]);
    let _locks = ks.lock(&[key]);
    let hash = live_hash(ks, key, now_ms())?;
    let mut replies = Vec::with_capacity(args.len() - 2);
    for name in &args[2..] {
        let value = match &hash {
            Some(hash) => field(ks, key, hash, name)?,
            None => None,
        };
        replies.push(Reply::optional(value));
    }
    Ok(Reply::Array(replies))
}

/// A field and its value.
type FieldValue = (Vec<u8>, Vec<u8>);

/// Every (field, value) of the hash at `key`, in field order.
fn all_fields(ks: &Keyspace, key: &[u8]) -> Result<Vec<FieldValue>, Reply> {
    let _locks = ks.lock(&[key]);
    let Some(hash) = live_hash(ks, key, now_ms())? else { return Ok(Vec::new()) };
    let prefix = field_prefix(key, hash.generation);
    let mut out = Vec::with_capacity(hash.fields as usize);
    for item in ks.db().prefix(&prefix)? {
        let (record, value) = item?;
        out.push((record[prefix.len()..].to_vec(), value));
    }
    Ok(out)
}

pub fn hgetall(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let pairs = all_fields(ctx.ks(), &args[1])?;
    Ok(Reply::Map(pairs.into_iter().map(|(f, v)| (Reply::Bulk(f), Reply::Bulk(v))).collect()))
}

pub fn hkeys(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let pairs = all_fields(ctx.ks(), &args[1])?;
    Ok(Reply::Array(pairs.into_iter().map(|(f, _)| Reply::Bulk(f)).collect()))
}

pub fn hvals(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let pairs = all_fields(ctx.ks(), &args[1])?;
    Ok(Reply::Array(pairs.into_iter().map(|(_, v)| Reply::Bulk(v)).collect()))
}

pub fn hdel(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (ks, key) = (ctx.ks(), &args[1]);
    if live_hash(ks, key, now_ms())?.is_none() {
        return Ok(Reply::Int(0));
    }
    let mut removed = 0;
    modify(ks, key, |hash, batch| {
        let mut seen = std::collections::HashSet::new();
        for name in args[2..].iter().filter(|n| seen.insert(n.as_slice())) {
            if field(ks, key, hash, name)?.is_some() {
                batch.delete(field_record(key, hash.generation, name));
                removed += 1;
            }
        }
        Ok((Reply::Int(removed), -removed))
    })
}

pub fn hlen(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let hash = live_hash(ctx.ks(), &args[1], now_ms())?;
    Ok(Reply::Int(hash.map_or(0, |h| h.fields as i64)))
}

pub fn hstrlen(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let reply = hget(ctx, args)?;
    Ok(Reply::Int(match reply {
        Reply::Bulk(v) => v.len() as i64,
        _ => 0,
    }))
}

pub fn hexists(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let reply = hget(ctx, args)?;
    Ok(Reply::Int(i64::from(matches!(reply, Reply::Bulk(_)))))
}

/// HINCRBY / HINCRBYFLOAT: reads the field, writes the sum, under the key's lock.
fn increment_field(
    ctx: &mut Ctx,
    args: &[Vec<u8>],
    add: impl FnOnce(Option<&[u8]>) -> Result<(Vec<u8>, Reply), Reply>,
) -> CmdResult {
    let (ks, key, name) = (ctx.ks(), &args[1], &args[2]);
    modify(ks, key, |hash, batch| {
        let current = field(ks, key, hash, name)?;
        let (value, reply) = add(current.as_deref())?;
        batch.put(field_record(key, hash.generation, name), value);
        Ok((reply, i64::from(current.is_none())))
    })
}

pub fn hincrby(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let delta = int_arg(&args[3])?;
    increment_field(ctx, args, |current| {
        let n = match current {
            None => 0,
            Some(text) => parse_int(text).ok_or_else(|| Reply::err("hash value is not an integer"))?,
        };
        let sum = n.checked_add(delta).ok_or_else(|| Reply::err("increment or decrement would overflow"))?;
        Ok((sum.to_string().into_bytes(), Reply::Int(sum)))
    })
}

pub fn hincrbyfloat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let delta = float_arg(&args[3])?;
    increment_field(ctx, args, |current| {
        let x = match current {
            None => 0.0,
            Some(text) => parse_float(text).ok_or_else(|| Reply::err("hash value is not a float"))?,
        };
        let sum = x + delta;
        if !sum.is_finite() {
            return Err(Reply::err("increment would produce NaN or Infinity"));
        }
        let text = format_double(sum).into_bytes();
        Ok((text.clone(), Reply::Bulk(text)))
    })
}
