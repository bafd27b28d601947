//! Sets: a member record per member, with an empty value (docs/format/server-records.md).

use rand::seq::SliceRandom;

use crate::collection::{live, member, members, modify, Changed};
use crate::command::{int_arg, CmdResult, Ctx};
use crate::keyspace::{member_record, CollectionKind::Set};
use crate::reply::Reply;

pub fn sadd(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (ks, key) = (ctx.ks(), &args[1]);
    modify(ks, key, Set, true, Reply::Int(0), |set, batch| {
        let mut seen = std::collections::HashSet::new();
        let mut added = 0;
        for name in args[2..].iter().filter(|n| seen.insert(n.as_slice())) {
            if member(ks, key, set, name)?.is_none() {
                batch.put(member_record(key, set.generation, name), Vec::new());
                added += 1;
            }
        }
        Ok(Changed { reply: Reply::Int(added as i64), len: set.len + added, head: 0 })
    })
}

pub fn srem(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (ks, key) = (ctx.ks(), &args[1]);
    modify(ks, key, Set, false, Reply::Int(0), |set, batch| {
        let mut seen = std::collections::HashSet::new();
        let mut removed = 0;
        for name in args[2..].iter().filter(|n| seen.insert(n.as_slice())) {
            if member(ks, key, set, name)?.is_some() {
                batch.delete(member_record(key, set.generation, name));
                removed += 1;
            }
        }
        Ok(Changed { reply: Reply::Int(removed as i64), len: set.len - removed, head: 0 })
    })
}

pub fn scard(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(live(ctx.ks(), &args[1], Set)?.map_or(0, |s| s.len as i64)))
}

pub fn sismember(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let ks = ctx.ks();
    let found = match live(ks, &args[1], Set)? {
        Some(set) => member(ks, &args[1], &set, &args[2])?.is_some(),
        None => false,
    };
    Ok(Reply::Int(i64::from(found)))
}

pub fn smismember(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let ks = ctx.ks();
    let set = live(ks, &args[1], Set)?;
    let mut replies = Vec::with_capacity(args.len() - 2);
    for name in &args[2..] {
        let found = match &set {
            Some(set) => member(ks, &args[1], set, name)?.is_some(),
            None => false,
        };
        replies.push(Reply::Int(i64::from(found)));
    }
    Ok(Reply::Array(replies))
}

fn all_members(ctx: &mut Ctx, key: &[u8]) -> Result<Vec<Vec<u8>>, Reply> {
    let ks = ctx.ks();
    let _locks = ks.lock(&[key]);
    match live(ks, key, Set)? {
        Some(set) => Ok(members(ks, key, &set, usize::MAX)?.into_iter().map(|(m, _)| m).collect()),
        None => Ok(Vec::new()),
    }
}

pub fn smembers(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Array(all_members(ctx, &args[1])?.into_iter().map(Reply::Bulk).collect()))
}

/// Random choices as SRANDMEMBER and HRANDFIELD make them: no count, one; a count n >= 0, up
/// to n distinct; n < 0, |n| with repeats.
pub fn random_picks<T: Clone>(all: &[T], count: Option<i64>) -> Vec<T> {
    let mut rng = rand::thread_rng();
    match count {
        None => all.choose(&mut rng).cloned().into_iter().collect(),
        Some(n) if n >= 0 => all.choose_multiple(&mut rng, n as usize).cloned().collect(),
        Some(n) => (0..n.unsigned_abs()).filter_map(|_| all.choose(&mut rng).cloned()).collect(),
    }
}

/// SRANDMEMBER key [count]: reads the whole set (O(n), unlike Redis's O(count)).
pub fn srandmember(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if args.len() > 3 {
        return Err(crate::command::syntax_error());
    }
    let count = args.get(2).map(|c| int_arg(c)).transpose()?;
    let chosen = random_picks(&all_members(ctx, &args[1])?, count);
    Ok(match count {
        None => Reply::optional(chosen.into_iter().next()),
        Some(_) => Reply::Array(chosen.into_iter().map(Reply::Bulk).collect()),
    })
}

/// SPOP key [count]
pub fn spop(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let count = match args.get(2) {
        Some(c) => Some(
            usize::try_from(int_arg(c)?)
                .map_err(|_| Reply::err("value is out of range, must be positive"))?,
        ),
        None => None,
    };
    let (ks, key) = (ctx.ks(), &args[1]);
    let absent = if count.is_some() { Reply::Array(Vec::new()) } else { Reply::Nil };
    modify(ks, key, Set, false, absent, |set, batch| {
        let all = members(ks, key, set, usize::MAX)?;
        let chosen: Vec<Vec<u8>> = all
            .choose_multiple(&mut rand::thread_rng(), count.unwrap_or(1))
            .map(|(m, _)| m.clone())
            .collect();
        for name in &chosen {
            batch.delete(member_record(key, set.generation, name));
        }
        let len = set.len - chosen.len() as u64;
        let reply = match count {
            Some(_) => Reply::Array(chosen.into_iter().map(Reply::Bulk).collect()),
            None => Reply::optional(chosen.into_iter().next()),
        };
        Ok(Changed { reply, len, head: 0 })
    })
}
