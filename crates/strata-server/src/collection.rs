//! What hashes, sets and lists share: finding the live collection at a key, changing it under the
//! key's lock in one batch, reading its members. Ordered engines only (reading all members is a
//! prefix scan).

use strata::WriteBatch;

use crate::command::wrong_type;
use crate::keyspace::{
    is_expired, member_prefix, member_record, now_ms, Collection, CollectionKind, Entry, Keyspace,
};
use crate::reply::Reply;

/// The live collection of `kind` at `key`, `None` if absent; WRONGTYPE if it holds another type.
pub fn live(ks: &Keyspace, key: &[u8], kind: CollectionKind) -> Result<Option<Collection>, Reply> {
    ks.require_ordered(&format!("{} values", kind.name()))?;
    match ks.entry(key, now_ms())? {
        None => Ok(None),
        Some(Entry::Collection(c)) if c.kind == kind => Ok(Some(c)),
        Some(_) => Err(wrong_type()),
    }
}

/// One member's value (an empty value for a set member that exists).
pub fn member(ks: &Keyspace, key: &[u8], c: &Collection, name: &[u8]) -> Result<Option<Vec<u8>>, Reply> {
    Ok(ks.db().get(member_record(key, c.generation, name))?)
}

/// A member and its value.
pub type Member = (Vec<u8>, Vec<u8>);

/// Every member of `c` in member order (for lists: element order), at most `limit`.
pub fn members(ks: &Keyspace, key: &[u8], c: &Collection, limit: usize) -> Result<Vec<Member>, Reply> {
    let prefix = member_prefix(key, c.generation);
    let mut out = Vec::with_capacity((c.len as usize).min(limit).min(1 << 16));
    for item in ks.db().prefix(&prefix)?.take(limit) {
        let (record, value) = item?;
        out.push((record[prefix.len()..].to_vec(), value));
    }
    Ok(out)
}

/// What a change did: its reply, and the collection's new length and head.
pub struct Changed {
    pub reply: Reply,
    pub len: u64,
    pub head: i64,
}

/// Runs `change` on the collection of `kind` at `key` (a new, empty one if absent) under the key's
/// lock; its member writes and the key record land in one batch. A collection left empty is
/// deleted, as Redis deletes empty hashes, sets and lists. With `create` false an absent key is
/// left alone and `absent` is the reply.
pub fn modify(
    ks: &Keyspace,
    key: &[u8],
    kind: CollectionKind,
    create: bool,
    absent: Reply,
    change: impl FnOnce(&Collection, &mut WriteBatch) -> Result<Changed, Reply>,
) -> Result<Reply, Reply> {
    ks.require_ordered(&format!("{} values", kind.name()))?;
    let now = now_ms();
    let _locks = ks.lock(&[key]);
    let old = ks.raw_entry(key)?;
    let current = match old.as_ref().filter(|e| !is_expired(e.expire_at_ms(), now)) {
        None if !create => return Ok(absent),
        None => Collection { kind, expire_at_ms: 0, generation: ks.new_generation(), len: 0, head: 0 },
        Some(Entry::Collection(c)) if c.kind == kind => *c,
        Some(_) => return Err(wrong_type()),
    };
    let mut batch = WriteBatch::new();
    let changed = change(&current, &mut batch)?;
    if batch.is_empty() {
        return Ok(changed.reply);
    }
    let new = Entry::Collection(Collection { len: changed.len, head: changed.head, ..current });
    let stale = ks.stage(&mut batch, key, old.as_ref(), (changed.len > 0).then_some(&new));
    ks.commit(batch)?;
    ks.drop_stale(key, stale)?;
    Ok(changed.reply)
}
