//! Hashes as composite keys: a key record holding the field count and a generation, and one
//! record per field (docs/format/server-records.md; `collection` has what sets and lists share).

use crate::collection::{live, member, members, modify, Changed};
use crate::command::{float_arg, int_arg, parse_float, parse_int, CmdResult, Ctx};
use crate::keyspace::{member_record, CollectionKind::Hash};
use crate::reply::{format_double, Reply, OK};

fn set_fields(ctx: &mut Ctx, args: &[Vec<u8>], only_new: bool) -> Result<i64, Reply> {
    if !args.len().is_multiple_of(2) {
        return Err(Reply::err(format!(
            "wrong number of arguments for '{}' command",
            String::from_utf8_lossy(&args[0]).to_lowercase()
        )));
    }
    let (ks, key) = (ctx.ks(), &args[1]);
    let mut added = 0;
    modify(ks, key, Hash, true, OK, |hash, batch| {
        let mut seen = std::collections::HashSet::new();
        for pair in args[2..].chunks(2) {
            let exists = member(ks, key, hash, &pair[0])?.is_some();
            let first_time = seen.insert(pair[0].as_slice());
            if exists && only_new {
                continue;
            }
            added += i64::from(!exists && first_time);
            batch.put(member_record(key, hash.generation, &pair[0]), pair[1].clone());
        }
        Ok(Changed { reply: OK, len: hash.len + added as u64, head: 0 })
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
    let value = match live(ks, &args[1], Hash)? {
        Some(hash) => member(ks, &args[1], &hash, &args[2])?,
        None => None,
    };
    ctx.server.counters.hit_or_miss(value.is_some());
    Ok(Reply::optional(value))
}

pub fn hmget(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (ks, key) = (ctx.ks(), &args[1]);
    let _locks = ks.lock(&[key]);
    let hash = live(ks, key, Hash)?;
    let mut replies = Vec::with_capacity(args.len() - 2);
    for name in &args[2..] {
        let value = match &hash {
            Some(hash) => member(ks, key, hash, name)?,
            None => None,
        };
        replies.push(Reply::optional(value));
    }
    Ok(Reply::Array(replies))
}

/// Every (field, value) of the hash at `key`, in field order.
fn all_fields(ks: &crate::keyspace::Keyspace, key: &[u8]) -> Result<Vec<crate::collection::Member>, Reply> {
    let _locks = ks.lock(&[key]);
    match live(ks, key, Hash)? {
        Some(hash) => members(ks, key, &hash, usize::MAX),
        None => Ok(Vec::new()),
    }
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
    modify(ks, key, Hash, false, Reply::Int(0), |hash, batch| {
        let mut seen = std::collections::HashSet::new();
        let mut removed = 0;
        for name in args[2..].iter().filter(|n| seen.insert(n.as_slice())) {
            if member(ks, key, hash, name)?.is_some() {
                batch.delete(member_record(key, hash.generation, name));
                removed += 1;
            }
        }
        Ok(Changed { reply: Reply::Int(removed as i64), len: hash.len - removed, head: 0 })
    })
}

pub fn hlen(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let hash = live(ctx.ks(), &args[1], Hash)?;
    Ok(Reply::Int(hash.map_or(0, |h| h.len as i64)))
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
    modify(ks, key, Hash, true, OK, |hash, batch| {
        let current = member(ks, key, hash, name)?;
        let (value, reply) = add(current.as_deref())?;
        batch.put(member_record(key, hash.generation, name), value);
        Ok(Changed { reply, len: hash.len + u64::from(current.is_none()), head: 0 })
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
    if !delta.is_finite() {
        return Err(Reply::err("value is NaN or Infinity"));
    }
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

/// HRANDFIELD key [count [WITHVALUES]]: like SRANDMEMBER, reading the whole hash (O(n)).
pub fn hrandfield(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let count = args.get(2).map(|c| int_arg(c)).transpose()?;
    let with_values = match args.get(3) {
        None => false,
        Some(word) if word.eq_ignore_ascii_case(b"withvalues") && args.len() == 4 => true,
        Some(_) => return Err(crate::command::syntax_error()),
    };
    if count.is_some_and(|n| n.checked_mul(2).is_none()) {
        return Err(Reply::err("value is out of range"));
    }
    let pairs = all_fields(ctx.ks(), &args[1])?;
    let chosen = crate::cmd_set::random_picks(&pairs, count);
    let Some(_) = count else {
        return Ok(chosen.into_iter().next().map_or(Reply::Nil, |(f, _)| Reply::Bulk(f)));
    };
    let resp3 = ctx.session.resp >= 3;
    Ok(Reply::Array(if with_values && resp3 {
        chosen.into_iter().map(|(f, v)| Reply::Array(vec![Reply::Bulk(f), Reply::Bulk(v)])).collect()
    } else if with_values {
        chosen.into_iter().flat_map(|(f, v)| [Reply::Bulk(f), Reply::Bulk(v)]).collect()
    } else {
        chosen.into_iter().map(|(f, _)| Reply::Bulk(f)).collect()
    }))
}
