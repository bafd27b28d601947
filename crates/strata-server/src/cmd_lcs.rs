//! LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]: the longest common subsequence of
//! two strings, by the dynamic program Redis uses (O(n·m) time and memory, bounded below).

use crate::cmd_strings::live_string;
use crate::command::{int_arg, syntax_error, CmdResult, Ctx};
use crate::keyspace::now_ms;
use crate::reply::Reply;

/// Largest table (cells of 4 bytes) LCS builds: 256 MiB.
const MAX_TABLE_CELLS: u64 = 64 * 1024 * 1024;

#[derive(Default)]
struct LcsOptions {
    len_only: bool,
    indexes: bool,
    min_match_len: u64,
    with_match_len: bool,
}

fn parse(args: &[Vec<u8>]) -> Result<LcsOptions, Reply> {
    let mut o = LcsOptions::default();
    let mut i = 0;
    while i < args.len() {
        match args[i].to_ascii_lowercase().as_slice() {
            b"len" => o.len_only = true,
            b"idx" => o.indexes = true,
            b"withmatchlen" => o.with_match_len = true,
            b"minmatchlen" if i + 1 < args.len() => {
                o.min_match_len = int_arg(&args[i + 1])?.max(0) as u64;
                i += 1;
            }
            _ => return Err(syntax_error()),
        }
        i += 1;
    }
    if o.len_only && o.indexes {
        return Err(Reply::err("If you want both the length and indexes, please just use IDX."));
    }
    Ok(o)
}

pub fn lcs(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let options = parse(&args[3..])?;
    let (ks, now) = (ctx.ks(), now_ms());
    let only_strings = |e: Reply| {
        if e.is_error() {
            Reply::error("WRONGTYPE The LCS command only supports strings")
        } else {
            e
        }
    };
    let a = live_string(ks, &args[1], now).map_err(only_strings)?.unwrap_or_default();
    let b = live_string(ks, &args[2], now).map_err(only_strings)?.unwrap_or_default();
    if (a.len() as u64 + 1) * (b.len() as u64 + 1) > MAX_TABLE_CELLS {
        return Err(Reply::err("Insufficient memory, transient memory for LCS exceeds the server's limit"));
    }
    let table = Table::build(&a, &b);
    let len = table.at(a.len(), b.len());
    if options.len_only {
        return Ok(Reply::Int(i64::from(len)));
    }
    let (sequence, matches) = table.walk(&a, &b, &options);
    if !options.indexes {
        return Ok(Reply::Bulk(sequence));
    }
    Ok(Reply::Map(vec![
        (Reply::bulk("matches"), Reply::Array(matches)),
        (Reply::bulk("len"), Reply::Int(i64::from(len))),
    ]))
}

/// `cells[i][j]`: the LCS length of the first i bytes of a and the first j of b.
struct Table {
    columns: usize,
    cells: Vec<u32>,
}

impl Table {
    fn build(a: &[u8], b: &[u8]) -> Table {
        let columns = b.len() + 1;
        let mut cells = vec![0u32; (a.len() + 1) * columns];
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                cells[i * columns + j] = if a[i - 1] == b[j - 1] {
                    cells[(i - 1) * columns + j - 1] + 1
                } else {
                    cells[(i - 1) * columns + j].max(cells[i * columns + j - 1])
                };
            }
        }
        Table { columns, cells }
    }

    fn at(&self, i: usize, j: usize) -> u32 {
        self.cells[i * self.columns + j]
    }

    /// Walks back from the end: the common subsequence, and the matching ranges (last first),
    /// each `[[a_start, a_end], [b_start, b_end]]` (plus the length with WITHMATCHLEN).
    fn walk(&self, a: &[u8], b: &[u8], o: &LcsOptions) -> (Vec<u8>, Vec<Reply>) {
        let (mut i, mut j) = (a.len(), b.len());
        let mut sequence = Vec::with_capacity(self.at(i, j) as usize);
        let mut matches = Vec::new();
        // The range being grown: (a_start, a_end, b_start, b_end).
        let mut range: Option<(usize, usize, usize, usize)> = None;
        while i > 0 && j > 0 {
            let mut emit = false;
            if a[i - 1] == b[j - 1] {
                sequence.push(a[i - 1]);
                match &mut range {
                    None => range = Some((i - 1, i - 1, j - 1, j - 1)),
                    Some((a_start, _, b_start, _)) if *a_start == i && *b_start == j => {
                        *a_start -= 1;
                        *b_start -= 1;
                    }
                    Some(_) => emit = true,
                }
                emit |= range.is_some_and(|(a_start, _, b_start, _)| a_start == 0 || b_start == 0);
                i -= 1;
                j -= 1;
            } else {
                if self.at(i - 1, j) > self.at(i, j - 1) {
                    i -= 1;
                } else {
                    j -= 1;
                }
                emit = range.is_some();
            }
            if let Some((a_start, a_end, b_start, b_end)) = range.filter(|_| emit) {
                let match_len = (a_end - a_start + 1) as u64;
                if o.indexes && match_len >= o.min_match_len {
                    let pair =
                        |s: usize, e: usize| Reply::Array(vec![Reply::Int(s as i64), Reply::Int(e as i64)]);
                    let mut item = vec![pair(a_start, a_end), pair(b_start, b_end)];
                    if o.with_match_len {
                        item.push(Reply::Int(match_len as i64));
                    }
                    matches.push(Reply::Array(item));
                }
                range = None;
            }
        }
        sequence.reverse();
        (sequence, matches)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_common_subsequence_and_its_ranges_match_redis() {
        let (a, b) = (b"ohmytext".as_slice(), b"mynewtext".as_slice());
        let table = Table::build(a, b);
        assert_eq!(table.at(a.len(), b.len()), 6);
        let options = LcsOptions { indexes: true, with_match_len: true, ..LcsOptions::default() };
        let (sequence, matches) = table.walk(a, b, &options);
        assert_eq!(sequence, b"mytext");
        // Redis: 1) [4,7] [5,8] len 4, 2) [2,3] [0,1] len 2.
        let range = |a0, a1, b0, b1, n| {
            Reply::Array(vec![
                Reply::Array(vec![Reply::Int(a0), Reply::Int(a1)]),
                Reply::Array(vec![Reply::Int(b0), Reply::Int(b1)]),
                Reply::Int(n),
            ])
        };
        assert_eq!(matches, vec![range(4, 7, 5, 8, 4), range(2, 3, 0, 1, 2)]);
    }
}
