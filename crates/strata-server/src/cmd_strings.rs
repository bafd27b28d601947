//! String commands. A write locks its keys, reads the entries it replaces and writes one batch;
//! the counters and in-place edits (INCR*, APPEND, SETRANGE, SETBIT) too (`edit_string`).

use crate::command::{float_arg, int_arg, parse_float, parse_int, syntax_error, wrong_type, CmdResult, Ctx};
use crate::keyspace::{is_expired, now_ms, Entry, Keyspace};
use crate::reply::{Reply, OK};

/// The live string of `key`: `Ok(None)` if absent, WRONGTYPE if it holds another type.
pub fn live_string(ks: &Keyspace, key: &[u8], now: u64) -> Result<Option<Vec<u8>>, Reply> {
    match ks.entry(key, now)? {
        None => Ok(None),
        Some(Entry::String { value, .. }) => Ok(Some(value)),
        Some(_) => Err(wrong_type()),
    }
}

pub fn get(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let value = live_string(ctx.ks(), &args[1], now_ms())?;
    ctx.server.counters.hit_or_miss(value.is_some());
    Ok(Reply::optional(value))
}

/// SET's options.
#[derive(Default)]
struct SetOptions {
    only_if_absent: bool,
    only_if_present: bool,
    return_old: bool,
    keep_ttl: bool,
    expire_at_ms: u64,
}

fn parse_set_options(args: &[Vec<u8>], now: u64) -> Result<SetOptions, Reply> {
    let mut o = SetOptions::default();
    let mut expiry_given = false;
    let mut i = 0;
    while i < args.len() {
        let word = args[i].to_ascii_uppercase();
        match word.as_slice() {
            b"NX" if !o.only_if_present => o.only_if_absent = true,
            b"XX" if !o.only_if_absent => o.only_if_present = true,
            b"GET" => o.return_old = true,
            b"KEEPTTL" if !expiry_given => o.keep_ttl = true,
            b"EX" | b"PX" | b"EXAT" | b"PXAT" if !expiry_given && !o.keep_ttl && i + 1 < args.len() => {
                let text = String::from_utf8_lossy(&word).to_ascii_lowercase();
                o.expire_at_ms = expiry_from(&text, &args[i + 1], now, "set")?;
                expiry_given = true;
                i += 1;
            }
            _ => return Err(syntax_error()),
        }
        i += 1;
    }
    Ok(o)
}

/// The absolute expiry an `EX`/`PX`/`EXAT`/`PXAT` argument names, checked as Redis checks it.
pub fn expiry_from(unit: &str, arg: &[u8], now: u64, command: &str) -> Result<u64, Reply> {
    let n = int_arg(arg)?;
    let invalid = || Reply::err(format!("invalid expire time in '{command}' command"));
    if n <= 0 {
        return Err(invalid());
    }
    let ms = match unit {
        "ex" | "exat" => n.checked_mul(1000).ok_or_else(invalid)?,
        _ => n,
    };
    let at = if unit.ends_with("at") { ms } else { (now as i64).checked_add(ms).ok_or_else(invalid)? };
    Ok(at as u64)
}

pub fn set(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let now = now_ms();
    let options = parse_set_options(&args[3..], now)?;
    set_with(ctx.ks(), &args[1], &args[2], &options, now)
}

fn set_with(ks: &Keyspace, key: &[u8], value: &[u8], o: &SetOptions, now: u64) -> CmdResult {
    let _locks = ks.lock(&[key]);
    let old = ks.raw_entry(key)?;
    let live = old.as_ref().filter(|e| !is_expired(e.expire_at_ms(), now));
    // Copied only when the reply carries it.
    let old_value = match live {
        Some(Entry::String { value, .. }) if o.return_old => Some(value.clone()),
        Some(Entry::String { .. }) => None,
        Some(_) if o.return_old => return Err(wrong_type()),
        _ => None,
    };
    let refused = (o.only_if_absent && live.is_some()) || (o.only_if_present && live.is_none());
    let answer = |done: bool| match (o.return_old, done) {
        (true, _) => Reply::optional(old_value.clone()),
        (false, true) => OK,
        (false, false) => Reply::Nil,
    };
    if refused {
        return Ok(answer(false));
    }
    let expire_at_ms = if o.keep_ttl { live.map_or(0, Entry::expire_at_ms) } else { o.expire_at_ms };
    let new = Entry::String { expire_at_ms, value: value.to_vec() };
    ks.replace(key, old.as_ref(), Some(&new))?;
    Ok(answer(true))
}

pub fn setnx(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let options = SetOptions { only_if_absent: true, ..SetOptions::default() };
    let reply = set_with(ctx.ks(), &args[1], &args[2], &options, now_ms())?;
    Ok(Reply::Int(i64::from(reply == OK)))
}

pub fn setex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    set_expiring(ctx, args, "ex", "setex")
}

pub fn psetex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    set_expiring(ctx, args, "px", "psetex")
}

fn set_expiring(ctx: &mut Ctx, args: &[Vec<u8>], unit: &str, command: &str) -> CmdResult {
    let now = now_ms();
    let expire_at_ms = expiry_from(unit, &args[2], now, command)?;
    let options = SetOptions { expire_at_ms, ..SetOptions::default() };
    set_with(ctx.ks(), &args[1], &args[3], &options, now)
}

pub fn getset(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let options = SetOptions { return_old: true, ..SetOptions::default() };
    set_with(ctx.ks(), &args[1], &args[2], &options, now_ms())
}

pub fn getdel(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (ks, key, now) = (ctx.ks(), &args[1], now_ms());
    let _locks = ks.lock(&[key]);
    let old = ks.raw_entry(key)?;
    match old.as_ref().filter(|e| !is_expired(e.expire_at_ms(), now)) {
        None => Ok(Reply::Nil),
        Some(Entry::String { value, .. }) => {
            let value = value.clone();
            ks.replace(key, old.as_ref(), None)?;
            Ok(Reply::Bulk(value))
        }
        Some(_) => Err(wrong_type()),
    }
}

/// GETEX key [EX s | PX ms | EXAT t | PXAT t | PERSIST]
pub fn getex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (ks, key, now) = (ctx.ks(), &args[1], now_ms());
    let new_expiry = match &args[2..] {
        [] => None,
        [word] if word.eq_ignore_ascii_case(b"persist") => Some(0),
        [word, n] => {
            let unit = String::from_utf8_lossy(word).to_ascii_lowercase();
            if !matches!(unit.as_str(), "ex" | "px" | "exat" | "pxat") {
                return Err(syntax_error());
            }
            Some(expiry_from(&unit, n, now, "getex")?)
        }
        _ => return Err(syntax_error()),
    };
    let _locks = ks.lock(&[key]);
    let old = ks.raw_entry(key)?;
    let Some(Entry::String { value, expire_at_ms }) =
        old.clone().filter(|e| !is_expired(e.expire_at_ms(), now))
    else {
        return match old.filter(|e| !is_expired(e.expire_at_ms(), now)) {
            Some(_) => Err(wrong_type()),
            None => Ok(Reply::Nil),
        };
    };
    if let Some(at) = new_expiry.filter(|at| *at != expire_at_ms) {
        let new = Entry::String { expire_at_ms: at, value: value.clone() };
        let gone = is_expired(at, now);
        ks.replace(key, old.as_ref(), (!gone).then_some(&new))?;
    }
    Ok(Reply::Bulk(value))
}

pub fn mget(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (ks, now) = (ctx.ks(), now_ms());
    let keys: Vec<&[u8]> = args[1..].iter().map(Vec::as_slice).collect();
    let _locks = ks.lock(&keys);
    let mut replies = Vec::with_capacity(keys.len());
    for key in keys {
        let value = match ks.entry(key, now)? {
            Some(Entry::String { value, .. }) => Some(value),
            _ => None,
        };
        ctx.server.counters.hit_or_miss(value.is_some());
        replies.push(Reply::optional(value));
    }
    Ok(Reply::Array(replies))
}

pub fn mset(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    mset_with(ctx.ks(), &args[1..], false, "mset").map(|_| OK)
}

pub fn msetnx(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    mset_with(ctx.ks(), &args[1..], true, "msetnx").map(|done| Reply::Int(i64::from(done)))
}

/// Sets every pair in one write batch (all or none land). With `only_if_none_exist`, sets
/// nothing if any key exists.
fn mset_with(ks: &Keyspace, pairs: &[Vec<u8>], only_if_none_exist: bool, name: &str) -> Result<bool, Reply> {
    if !pairs.len().is_multiple_of(2) {
        return Err(Reply::err(format!("wrong number of arguments for '{name}' command")));
    }
    let now = now_ms();
    let keys: Vec<&[u8]> = pairs.iter().step_by(2).map(Vec::as_slice).collect();
    let _locks = ks.lock(&keys);
    let mut batch = strata::WriteBatch::new();
    // The last value given for a key wins, as in Redis.
    let mut last_of = std::collections::HashMap::new();
    for pair in pairs.chunks(2) {
        last_of.insert(pair[0].as_slice(), pair[1].as_slice());
    }
    let mut stale = Vec::new();
    for (key, value) in last_of {
        let old = ks.raw_entry(key)?;
        if only_if_none_exist && old.as_ref().is_some_and(|e| !is_expired(e.expire_at_ms(), now)) {
            return Ok(false);
        }
        let new = Entry::String { expire_at_ms: 0, value: value.to_vec() };
        stale.push((key, ks.stage(&mut batch, key, old.as_ref(), Some(&new))));
    }
    ks.commit(batch)?;
    for (key, generation) in stale {
        ks.drop_stale(key, generation)?;
    }
    Ok(true)
}

/// Changes `key`'s string, keeping its expiry (a missing or expired key starts empty, without
/// one): a read and one write batch under the key's lock, which every server write to the key
/// holds, so nothing lands between them (the server is the store's only writer). `edit` returns
/// the new string and the command's reply, or an error reply; on an error nothing is written.
///
/// Not an engine `rmw`: that holds the engine's log lock, which every writer of every key
/// needs, across the read and the edit (docs/benchmarks.md, "`strata serve` against
/// redis-server").
fn edit_string(
    ks: &Keyspace,
    key: &[u8],
    edit: impl FnOnce(Option<&[u8]>) -> Result<(Vec<u8>, Reply), Reply>,
) -> CmdResult {
    let now = now_ms();
    let _locks = ks.lock(&[key]);
    let old = ks.raw_entry(key)?;
    let (expire_at_ms, current) = match old.as_ref().filter(|e| !is_expired(e.expire_at_ms(), now)) {
        None => (0, None),
        Some(Entry::String { expire_at_ms, value }) => (*expire_at_ms, Some(value.as_slice())),
        Some(_) => return Err(wrong_type()),
    };
    let (value, reply) = edit(current)?;
    ks.replace(key, old.as_ref(), Some(&Entry::String { expire_at_ms, value }))?;
    Ok(reply)
}

fn incr_by(ctx: &mut Ctx, key: &[u8], delta: i64) -> CmdResult {
    edit_string(ctx.ks(), key, |current| {
        let n = match current {
            None => 0,
            Some(text) => {
                parse_int(text).ok_or_else(|| Reply::err("value is not an integer or out of range"))?
            }
        };
        let sum = n.checked_add(delta).ok_or_else(|| Reply::err("increment or decrement would overflow"))?;
        Ok((sum.to_string().into_bytes(), Reply::Int(sum)))
    })
}

pub fn incr(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    incr_by(ctx, &args[1], 1)
}

pub fn decr(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    incr_by(ctx, &args[1], -1)
}

pub fn incrby(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    incr_by(ctx, &args[1], int_arg(&args[2])?)
}

pub fn decrby(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let delta = int_arg(&args[2])?;
    let negated = delta.checked_neg().ok_or_else(|| Reply::err("decrement would overflow"))?;
    incr_by(ctx, &args[1], negated)
}

pub fn incrbyfloat(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let delta = float_arg(&args[2])?;
    edit_string(ctx.ks(), &args[1], |current| {
        let x = match current {
            None => 0.0,
            Some(text) => parse_float(text).ok_or_else(|| Reply::err("value is not a valid float"))?,
        };
        let sum = x + delta;
        if !sum.is_finite() {
            return Err(Reply::err("increment would produce NaN or Infinity"));
        }
        let text = crate::reply::format_double(sum).into_bytes();
        Ok((text.clone(), Reply::Bulk(text)))
    })
}

pub fn append(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let tail = &args[2];
    edit_string(ctx.ks(), &args[1], |current| {
        let mut value = current.map(<[u8]>::to_vec).unwrap_or_default();
        value.extend_from_slice(tail);
        let len = value.len() as i64;
        Ok((value, Reply::Int(len)))
    })
}

pub fn strlen(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let value = live_string(ctx.ks(), &args[1], now_ms())?;
    Ok(Reply::Int(value.map_or(0, |v| v.len() as i64)))
}

pub fn getrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (start, end) = (int_arg(&args[2])?, int_arg(&args[3])?);
    let value = live_string(ctx.ks(), &args[1], now_ms())?.unwrap_or_default();
    let len = value.len() as i64;
    if len == 0 || (start < 0 && end < 0 && start > end) {
        return Ok(Reply::bulk(Vec::new()));
    }
    let clamp = |i: i64| if i < 0 { (len + i).max(0) } else { i };
    let (start, end) = (clamp(start), clamp(end).min(len - 1));
    if start > end || start >= len {
        return Ok(Reply::bulk(Vec::new()));
    }
    Ok(Reply::bulk(value[start as usize..=end as usize].to_vec()))
}

pub fn setrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let offset = int_arg(&args[2])?;
    if offset < 0 {
        return Err(Reply::err("offset is out of range"));
    }
    let (ks, key, patch) = (ctx.ks(), &args[1], &args[3]);
    let limit = ks.max_string_bytes() as i64;
    // Checked: an offset near i64::MAX must be an error, not a wrapped length.
    if offset.checked_add(patch.len() as i64).is_none_or(|end| end > limit) {
        return Err(Reply::err(format!(
            "string exceeds maximum allowed size ({limit} bytes with this engine)"
        )));
    }
    if patch.is_empty() {
        // Nothing to write: the length of what is there (and no key created).
        return Ok(Reply::Int(live_string(ks, key, now_ms())?.map_or(0, |v| v.len() as i64)));
    }
    edit_string(ks, key, |current| {
        let mut value = current.map(<[u8]>::to_vec).unwrap_or_default();
        let end = offset as usize + patch.len();
        if value.len() < end {
            value.resize(end, 0);
        }
        value[offset as usize..end].copy_from_slice(patch);
        let len = value.len() as i64;
        Ok((value, Reply::Int(len)))
    })
}

/// A bit offset as SETBIT/GETBIT take it: 0 ..= 2^32 - 1 (Redis's 512 MiB string limit).
fn bit_offset(arg: &[u8]) -> Result<u64, Reply> {
    let out_of_range = || Reply::err("bit offset is not an integer or out of range");
    let n = parse_int(arg).ok_or_else(out_of_range)?;
    u64::try_from(n).ok().filter(|n| *n < 1 << 32).ok_or_else(out_of_range)
}

/// Bit `offset` of `bytes`, the most significant bit of byte 0 first.
fn bit_at(bytes: &[u8], offset: u64) -> u8 {
    bytes.get((offset / 8) as usize).map_or(0, |b| (b >> (7 - offset % 8)) & 1)
}

pub fn setbit(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let offset = bit_offset(&args[2])?;
    let bit = match args[3].as_slice() {
        b"0" => 0u8,
        b"1" => 1,
        _ => return Err(Reply::err("bit is not an integer or out of range")),
    };
    let ks = ctx.ks();
    let byte_index = (offset / 8) as usize;
    if byte_index >= ks.max_string_bytes() {
        return Err(Reply::err("string exceeds maximum allowed size with this engine"));
    }
    edit_string(ks, &args[1], |current| {
        let mut value = current.map(<[u8]>::to_vec).unwrap_or_default();
        let previous = bit_at(&value, offset);
        if value.len() <= byte_index {
            value.resize(byte_index + 1, 0);
        }
        let mask = 1u8 << (7 - offset % 8);
        value[byte_index] = if bit == 1 { value[byte_index] | mask } else { value[byte_index] & !mask };
        Ok((value, Reply::Int(i64::from(previous))))
    })
}

pub fn getbit(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let offset = bit_offset(&args[2])?;
    let value = live_string(ctx.ks(), &args[1], now_ms())?.unwrap_or_default();
    Ok(Reply::Int(i64::from(bit_at(&value, offset))))
}
