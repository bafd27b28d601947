//! Lists: an element record per position; positions are signed and stored so that they sort in
//! order (docs/format/server-records.md), the key record keeps the first position and the length.
//! Pushes and pops at either end, ranges and indexes; no insertion in the middle (LINSERT, LREM).

use std::time::{Duration, Instant};

use crate::collection::{live, modify, Changed};
use crate::command::{float_arg, int_arg, CmdResult, Ctx};
use crate::keyspace::{member_prefix, member_record, Collection, CollectionKind::List};
use crate::reply::Reply;
use crate::state::{BlockedPop, ServerState, Session};

/// A position as member bytes: sign bit flipped, big-endian, so byte order is number order.
fn position_bytes(position: i64) -> [u8; 8] {
    ((position as u64) ^ (1 << 63)).to_be_bytes()
}

fn element_record(key: &[u8], list: &Collection, index: u64) -> Vec<u8> {
    member_record(key, list.generation, &position_bytes(list.head + index as i64))
}

fn push(ctx: &mut Ctx, args: &[Vec<u8>], at_head: bool, create: bool) -> CmdResult {
    let (ks, key) = (ctx.ks(), &args[1]);
    let pushed = modify(ks, key, List, create, Reply::Int(0), |list, batch| {
        let (mut head, mut len) = (list.head, list.len);
        for element in &args[2..] {
            let position = if at_head {
                head -= 1;
                head
            } else {
                head + len as i64
            };
            batch.put(member_record(key, list.generation, &position_bytes(position)), element.clone());
            len += 1;
        }
        Ok(Changed { reply: Reply::Int(len as i64), len, head })
    })?;
    // The key's lock is released: a woken client's pop can take the element.
    if pushed != Reply::Int(0) {
        ctx.server.list_pushes.pushed();
    }
    Ok(pushed)
}

pub fn rpush(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    push(ctx, args, false, true)
}

pub fn lpush(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    push(ctx, args, true, true)
}

pub fn rpushx(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    push(ctx, args, false, false)
}

pub fn lpushx(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    push(ctx, args, true, false)
}

/// Pops up to `count` elements from one end; `None` count: one element as a bulk reply.
fn pop(ctx: &Ctx, key: &[u8], from_head: bool, count: Option<u64>) -> CmdResult {
    let ks = ctx.ks();
    let absent = if count.is_some() { Reply::NilArray } else { Reply::Nil };
    modify(ks, key, List, false, absent, |list, batch| {
        let n = count.unwrap_or(1).min(list.len);
        let mut taken = Vec::with_capacity(n as usize);
        for i in 0..n {
            let index = if from_head { i } else { list.len - 1 - i };
            let record = element_record(key, list, index);
            taken.push(ks.db().get(&record)?.unwrap_or_default());
            batch.delete(record);
        }
        let head = if from_head { list.head + n as i64 } else { list.head };
        let reply = match count {
            Some(_) => Reply::Array(taken.into_iter().map(Reply::Bulk).collect()),
            None => Reply::optional(taken.into_iter().next()),
        };
        Ok(Changed { reply, len: list.len - n, head })
    })
}

fn pop_command(ctx: &mut Ctx, args: &[Vec<u8>], from_head: bool) -> CmdResult {
    let count = match args.get(2) {
        Some(c) => Some(
            u64::try_from(int_arg(c)?).map_err(|_| Reply::err("value is out of range, must be positive"))?,
        ),
        None => None,
    };
    if args.len() > 3 {
        return Err(crate::command::syntax_error());
    }
    pop(ctx, &args[1], from_head, count)
}

pub fn lpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    pop_command(ctx, args, true)
}

pub fn rpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    pop_command(ctx, args, false)
}

pub fn llen(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(live(ctx.ks(), &args[1], List)?.map_or(0, |l| l.len as i64)))
}

/// A Redis index (negative: from the end) as an offset from the head, if inside the list.
fn resolve(index: i64, len: u64) -> Option<u64> {
    let i = if index < 0 { len as i64 + index } else { index };
    (0..len as i64).contains(&i).then_some(i as u64)
}

pub fn lindex(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let ks = ctx.ks();
    let index = int_arg(&args[2])?;
    let Some(list) = live(ks, &args[1], List)? else { return Ok(Reply::Nil) };
    match resolve(index, list.len) {
        Some(i) => Ok(Reply::optional(ks.db().get(element_record(&args[1], &list, i))?)),
        None => Ok(Reply::Nil),
    }
}

pub fn lset(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (ks, key) = (ctx.ks(), &args[1]);
    let index = int_arg(&args[2])?;
    modify(ks, key, List, false, Reply::err("no such key"), |list, batch| {
        let i = resolve(index, list.len).ok_or_else(|| Reply::err("index out of range"))?;
        batch.put(element_record(key, list, i), args[3].clone());
        Ok(Changed { reply: crate::reply::OK, len: list.len, head: list.head })
    })
}

pub fn lrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (ks, key) = (ctx.ks(), &args[1]);
    let (start, stop) = (int_arg(&args[2])?, int_arg(&args[3])?);
    let _locks = ks.lock(&[key]);
    let Some(list) = live(ks, key, List)? else { return Ok(Reply::Array(Vec::new())) };
    let len = list.len as i64;
    let start = if start < 0 { (len + start).max(0) } else { start };
    let stop = if stop < 0 { len + stop } else { stop.min(len - 1) };
    if start > stop || start >= len {
        return Ok(Reply::Array(Vec::new()));
    }
    let (first, last) = (element_record(key, &list, start as u64), element_record(key, &list, stop as u64));
    let prefix_len = member_prefix(key, list.generation).len();
    let mut out = Vec::with_capacity((stop - start + 1) as usize);
    for item in ks.db().range(first..=last)? {
        let (record, value) = item?;
        debug_assert_eq!(record.len(), prefix_len + 8);
        out.push(Reply::Bulk(value));
    }
    Ok(Reply::Array(out))
}

/// BLPOP/BRPOP key [key ...] timeout: pops from the first non-empty list; else the client
/// blocks (`Session::blocked`; conn.rs waits for a push, the timeout or shutdown and then
/// `retry_blocked_pop`), `timeout` seconds at most (0: for ever). Inside MULTI it does not
/// wait, as in Redis.
fn blocking_pop(ctx: &mut Ctx, args: &[Vec<u8>], from_head: bool) -> CmdResult {
    let timeout =
        float_arg(&args[args.len() - 1]).map_err(|_| Reply::err("timeout is not a float or out of range"))?;
    if timeout < 0.0 {
        return Err(Reply::err("timeout is negative"));
    }
    let deadline = (timeout > 0.0).then(|| Instant::now() + Duration::from_secs_f64(timeout.min(1e9)));
    let keys = &args[1..args.len() - 1];
    if let Some(popped) = pop_first(ctx, keys, from_head)? {
        return Ok(popped);
    }
    if ctx.session.in_exec || ctx.server.is_shutting_down() {
        return Ok(Reply::NilArray);
    }
    ctx.session.blocked = Some(BlockedPop { keys: keys.to_vec(), from_head, deadline });
    // Not sent: the connection answers once the pop is served or times out.
    Ok(Reply::NilArray)
}

/// `[key, element]` from the first of `keys` whose list is not empty.
fn pop_first(ctx: &Ctx, keys: &[Vec<u8>], from_head: bool) -> Result<Option<Reply>, Reply> {
    for key in keys {
        if let Reply::Bulk(value) = pop(ctx, key, from_head, None)? {
            return Ok(Some(Reply::Array(vec![Reply::Bulk(key.clone()), Reply::Bulk(value)])));
        }
    }
    Ok(None)
}

/// Tries the session's blocked pop again: its reply once served, timed out or the server is
/// shutting down; `None` (still blocked) otherwise.
pub fn retry_blocked_pop(server: &ServerState, session: &mut Session) -> Option<Reply> {
    let blocked = session.blocked.take()?;
    let ctx = Ctx { server, session };
    match pop_first(&ctx, &blocked.keys, blocked.from_head) {
        Ok(Some(reply)) | Err(reply) => return Some(reply),
        Ok(None) => {}
    }
    let expired = blocked.deadline.is_some_and(|d| Instant::now() >= d);
    if expired || server.is_shutting_down() {
        return Some(Reply::NilArray);
    }
    ctx.session.blocked = Some(blocked);
    None
}

pub fn blpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    blocking_pop(ctx, args, true)
}

pub fn brpop(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    blocking_pop(ctx, args, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_sort_as_numbers() {
        let mut positions = [-3i64, 5, -1, 0, i64::MIN, i64::MAX, 1];
        let mut as_bytes: Vec<[u8; 8]> = positions.iter().map(|p| position_bytes(*p)).collect();
        positions.sort_unstable();
        as_bytes.sort_unstable();
        assert_eq!(as_bytes, positions.iter().map(|p| position_bytes(*p)).collect::<Vec<_>>());
    }

    #[test]
    fn indexes_resolve_from_either_end() {
        assert_eq!(resolve(0, 3), Some(0));
        assert_eq!(resolve(-1, 3), Some(2));
        assert_eq!(resolve(3, 3), None);
        assert_eq!(resolve(-4, 3), None);
    }
}
