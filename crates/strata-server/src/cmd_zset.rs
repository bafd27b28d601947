//! Sorted sets, as much as YCSB's Redis binding and simple leaderboards need: ZADD, ZREM, ZSCORE,
//! ZCARD, ZRANGE (by rank), ZRANGEBYSCORE. Each member has two member records
//! (docs/format/server-records.md): `0x00 member` → its score (8 bytes, f64 LE) to find a
//! member's score, and `0x01 score member` → empty, in score order for ranges.

use crate::collection::{live, modify, Changed};
use crate::command::{float_arg, int_arg, parse_float, syntax_error, CmdResult, Ctx};
use crate::keyspace::{member_prefix, member_record, Collection, CollectionKind::SortedSet, Keyspace};
use crate::reply::{format_double, Reply};

const BY_MEMBER: u8 = 0x00;
const BY_SCORE: u8 = 0x01;

/// A score as bytes whose order is the scores' order (sign flipped for positives, all bits for
/// negatives), big-endian.
fn score_bytes(score: f64) -> [u8; 8] {
    let bits = score.to_bits();
    let ordered = if bits >> 63 == 1 { !bits } else { bits ^ (1 << 63) };
    ordered.to_be_bytes()
}

fn score_from_bytes(bytes: [u8; 8]) -> f64 {
    let ordered = u64::from_be_bytes(bytes);
    f64::from_bits(if ordered >> 63 == 1 { ordered ^ (1 << 63) } else { !ordered })
}

fn by_member(key: &[u8], z: &Collection, member: &[u8]) -> Vec<u8> {
    let mut sub = Vec::with_capacity(1 + member.len());
    sub.push(BY_MEMBER);
    sub.extend_from_slice(member);
    member_record(key, z.generation, &sub)
}

fn by_score(key: &[u8], z: &Collection, score: f64, member: &[u8]) -> Vec<u8> {
    let mut sub = Vec::with_capacity(9 + member.len());
    sub.push(BY_SCORE);
    sub.extend_from_slice(&score_bytes(score));
    sub.extend_from_slice(member);
    member_record(key, z.generation, &sub)
}

fn score_of(ks: &Keyspace, key: &[u8], z: &Collection, member: &[u8]) -> Result<Option<f64>, Reply> {
    let bytes = ks.db().get(by_member(key, z, member))?;
    Ok(bytes.and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok()).map(f64::from_le_bytes))
}

/// ZADD key [NX|XX] [CH] score member [score member ...]
pub fn zadd(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (mut only_new, mut only_existing, mut count_changed, mut at) = (false, false, false, 2);
    while at < args.len() {
        match args[at].to_ascii_lowercase().as_slice() {
            b"nx" => only_new = true,
            b"xx" => only_existing = true,
            b"ch" => count_changed = true,
            b"gt" | b"lt" | b"incr" => {
                return Err(Reply::err("ZADD GT, LT and INCR are not supported by strata serve"))
            }
            _ => break,
        }
        at += 1;
    }
    let pairs = &args[at..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(syntax_error());
    }
    if only_new && only_existing {
        return Err(Reply::err("XX and NX options at the same time are not compatible"));
    }
    let scores: Vec<f64> = pairs.chunks(2).map(|p| float_arg(&p[0])).collect::<Result<_, _>>()?;
    let (ks, key) = (ctx.ks(), &args[1]);
    modify(ks, key, SortedSet, !only_existing, Reply::Int(0), |z, batch| {
        let (mut added, mut changed) = (0u64, 0u64);
        let mut latest = std::collections::HashMap::new();
        for (pair, score) in pairs.chunks(2).zip(&scores) {
            latest.insert(pair[1].as_slice(), *score);
        }
        for (member, score) in latest {
            match score_of(ks, key, z, member)? {
                Some(_) if only_new => continue,
                None if only_existing => continue,
                Some(old) if old == score => continue,
                Some(old) => {
                    batch.delete(by_score(key, z, old, member));
                }
                None => added += 1,
            }
            changed += 1;
            batch.put(by_member(key, z, member), score.to_le_bytes().to_vec());
            batch.put(by_score(key, z, score, member), Vec::new());
        }
        let reply = Reply::Int(if count_changed { changed } else { added } as i64);
        Ok(Changed { reply, len: z.len + added, head: 0 })
    })
}

pub fn zrem(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (ks, key) = (ctx.ks(), &args[1]);
    modify(ks, key, SortedSet, false, Reply::Int(0), |z, batch| {
        let mut seen = std::collections::HashSet::new();
        let mut removed = 0;
        for member in args[2..].iter().filter(|m| seen.insert(m.as_slice())) {
            if let Some(score) = score_of(ks, key, z, member)? {
                batch.delete(by_member(key, z, member));
                batch.delete(by_score(key, z, score, member));
                removed += 1;
            }
        }
        Ok(Changed { reply: Reply::Int(removed as i64), len: z.len - removed, head: 0 })
    })
}

pub fn zscore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let ks = ctx.ks();
    let score = match live(ks, &args[1], SortedSet)? {
        Some(z) => score_of(ks, &args[1], &z, &args[2])?,
        None => None,
    };
    Ok(score.map_or(Reply::Nil, |s| Reply::bulk(format_double(s))))
}

pub fn zcard(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Int(live(ctx.ks(), &args[1], SortedSet)?.map_or(0, |z| z.len as i64)))
}

/// A ZRANGEBYSCORE bound: `-inf`, `+inf`, a score, or `(score` (exclusive).
fn score_bound(arg: &[u8]) -> Result<(f64, bool), Reply> {
    let (text, exclusive) = match arg.strip_prefix(b"(") {
        Some(rest) => (rest, true),
        None => (arg, false),
    };
    let score = parse_float(text).ok_or_else(|| Reply::err("min or max is not a float"))?;
    Ok((score, exclusive))
}

/// Members in score order from the first whose score passes `from`, calling `visit` with each
/// (member, score) until it returns false.
fn walk_by_score(
    ks: &Keyspace,
    key: &[u8],
    z: &Collection,
    from: f64,
    mut visit: impl FnMut(&[u8], f64) -> bool,
) -> Result<(), Reply> {
    let prefix_len = member_prefix(key, z.generation).len() + 1;
    let start = by_score(key, z, from, b"");
    let mut end = member_prefix(key, z.generation);
    end.push(BY_SCORE + 1);
    for item in ks.db().range(start..end)? {
        let (record, _) = item?;
        // A record too short for its score bytes is not one this server wrote: skipped.
        let Some(score) = record.get(prefix_len..prefix_len + 8).and_then(|b| <[u8; 8]>::try_from(b).ok())
        else {
            continue;
        };
        if !visit(&record[prefix_len + 8..], score_from_bytes(score)) {
            break;
        }
    }
    Ok(())
}

fn ranged_reply(found: Vec<(Vec<u8>, f64)>, with_scores: bool, resp3: bool) -> Reply {
    Reply::Array(if with_scores && resp3 {
        found.into_iter().map(|(m, s)| Reply::Array(vec![Reply::Bulk(m), Reply::Double(s)])).collect()
    } else if with_scores {
        found.into_iter().flat_map(|(m, s)| [Reply::Bulk(m), Reply::bulk(format_double(s))]).collect()
    } else {
        found.into_iter().map(|(m, _)| Reply::Bulk(m)).collect()
    })
}

/// WITHSCORES and LIMIT offset count, in any order.
fn range_options(args: &[Vec<u8>]) -> Result<(bool, usize, usize), Reply> {
    let (mut with_scores, mut offset, mut count, mut i) = (false, 0usize, usize::MAX, 0);
    while i < args.len() {
        match args[i].to_ascii_lowercase().as_slice() {
            b"withscores" => with_scores = true,
            b"limit" if i + 2 < args.len() => {
                offset = usize::try_from(int_arg(&args[i + 1])?).unwrap_or(usize::MAX);
                let n = int_arg(&args[i + 2])?;
                count = if n < 0 { usize::MAX } else { n as usize };
                i += 2;
            }
            _ => return Err(syntax_error()),
        }
        i += 1;
    }
    Ok((with_scores, offset, count))
}

/// ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]
pub fn zrangebyscore(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let ((min, min_open), (max, max_open)) = (score_bound(&args[2])?, score_bound(&args[3])?);
    let (with_scores, offset, count) = range_options(&args[4..])?;
    let (ks, key) = (ctx.ks(), &args[1]);
    let _locks = ks.lock(&[key]);
    let Some(z) = live(ks, key, SortedSet)? else { return Ok(Reply::Array(Vec::new())) };
    let (mut skipped, mut found) = (0, Vec::new());
    walk_by_score(ks, key, &z, min, |member, score| {
        if (min_open && score <= min) || score < min {
            return true;
        }
        if score > max || (max_open && score >= max) || found.len() >= count {
            return false;
        }
        if skipped < offset {
            skipped += 1;
        } else {
            found.push((member.to_vec(), score));
        }
        true
    })?;
    Ok(ranged_reply(found, with_scores, ctx.session.resp >= 3))
}

/// ZRANGE key start stop [WITHSCORES] (by rank; negative ranks count from the end).
pub fn zrange(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let (start, stop) = (int_arg(&args[2])?, int_arg(&args[3])?);
    let (with_scores, _, _) = match &args[4..] {
        [] => (false, 0, 0),
        [word] if word.eq_ignore_ascii_case(b"withscores") => (true, 0, 0),
        _ => {
            return Err(Reply::err("ZRANGE BYSCORE, BYLEX, REV and LIMIT are not supported by strata serve"))
        }
    };
    let (ks, key) = (ctx.ks(), &args[1]);
    let _locks = ks.lock(&[key]);
    let Some(z) = live(ks, key, SortedSet)? else { return Ok(Reply::Array(Vec::new())) };
    let len = z.len as i64;
    let start = if start < 0 { (len + start).max(0) } else { start };
    let stop = if stop < 0 { len + stop } else { stop.min(len - 1) };
    let mut found = Vec::new();
    let mut rank = 0;
    if start <= stop {
        walk_by_score(ks, key, &z, f64::NEG_INFINITY, |member, score| {
            if rank >= start {
                found.push((member.to_vec(), score));
            }
            rank += 1;
            rank <= stop
        })?;
    }
    Ok(ranged_reply(found, with_scores, ctx.session.resp >= 3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_bytes_sort_as_scores_and_round_trip() {
        let mut scores = [3.5, -1.0, 0.0, -0.5, f64::INFINITY, f64::NEG_INFINITY, 1e300, -1e-300];
        let mut encoded: Vec<[u8; 8]> = scores.iter().map(|s| score_bytes(*s)).collect();
        scores.sort_by(f64::total_cmp);
        encoded.sort_unstable();
        let decoded: Vec<f64> = encoded.into_iter().map(score_from_bytes).collect();
        assert_eq!(decoded, scores);
    }
}
