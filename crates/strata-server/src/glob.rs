//! Redis's glob patterns (KEYS, SCAN MATCH, CONFIG GET): `*`, `?`, `[abc]`, `[^a-z]`, `\x`.

/// Patterns with more `*` than this match nothing, as in Redis (which bounds its recursion so);
/// here the match is iterative and would not need the bound.
const MAX_STARS: usize = 1000;

/// Whether `text` matches `pattern` (byte-wise, case-sensitive).
pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
    if pattern.iter().filter(|&&b| b == b'*').count() > MAX_STARS {
        return false;
    }
    // Iterative with one backtrack point for the last `*`: linear in practice, never recursive.
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match step(pattern, p, text[t]) {
            Step::Star => {
                star = Some((p + 1, t));
                p += 1;
                continue;
            }
            Step::Matched(next) => {
                p = next;
                t += 1;
                continue;
            }
            Step::Failed => {}
        }
        match star {
            Some((after_star, from)) => {
                p = after_star;
                t = from + 1;
                star = Some((after_star, from + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

enum Step {
    Star,
    Matched(usize),
    Failed,
}

/// Matches one text byte against the pattern element at `p`.
fn step(pattern: &[u8], p: usize, byte: u8) -> Step {
    match pattern.get(p) {
        None => Step::Failed,
        Some(b'*') => Step::Star,
        Some(b'?') => Step::Matched(p + 1),
        Some(b'[') => class(pattern, p + 1, byte),
        Some(b'\\') if p + 1 < pattern.len() => {
            if pattern[p + 1] == byte {
                Step::Matched(p + 2)
            } else {
                Step::Failed
            }
        }
        Some(&c) if c == byte => Step::Matched(p + 1),
        Some(_) => Step::Failed,
    }
}

/// A `[...]` class starting after its `[`; an unclosed class runs to the pattern's end.
fn class(pattern: &[u8], mut p: usize, byte: u8) -> Step {
    let negated = pattern.get(p) == Some(&b'^');
    if negated {
        p += 1;
    }
    let mut hit = false;
    while p < pattern.len() && pattern[p] != b']' {
        if pattern[p] == b'\\' && p + 1 < pattern.len() {
            hit |= pattern[p + 1] == byte;
            p += 2;
        } else if p + 2 < pattern.len() && pattern[p + 1] == b'-' && pattern[p + 2] != b']' {
            let (lo, hi) = (pattern[p].min(pattern[p + 2]), pattern[p].max(pattern[p + 2]));
            hit |= (lo..=hi).contains(&byte);
            p += 3;
        } else {
            hit |= pattern[p] == byte;
            p += 1;
        }
    }
    if hit != negated {
        Step::Matched((p + 1).min(pattern.len()))
    } else {
        Step::Failed
    }
}

/// The literal prefix every match of `pattern` starts with (so a scan can seek to it).
pub fn literal_prefix(pattern: &[u8]) -> Vec<u8> {
    let mut prefix = Vec::new();
    let mut i = 0;
    while i < pattern.len() {
        match pattern[i] {
            b'*' | b'?' | b'[' => break,
            b'\\' if i + 1 < pattern.len() => {
                prefix.push(pattern[i + 1]);
                i += 2;
            }
            c => {
                prefix.push(c);
                i += 1;
            }
        }
    }
    prefix
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_as_redis_does() {
        let cases: &[(&str, &str, bool)] = &[
            ("*", "anything", true),
            ("*", "", true),
            ("h?llo", "hello", true),
            ("h?llo", "hllo", false),
            ("h*llo", "heeeello", true),
            ("h[ae]llo", "hallo", true),
            ("h[ae]llo", "hillo", false),
            ("h[^e]llo", "hallo", true),
            ("h[^e]llo", "hello", false),
            ("h[a-b]llo", "hbllo", true),
            ("key:*:end", "key:1:2:end", true),
            ("key:*:end", "key:1:2:en", false),
            ("a\\*b", "a*b", true),
            ("a\\*b", "aXb", false),
            ("*a*b*c", "xxaxxbxxc", true),
            ("foo*", "fo", false),
        ];
        for (pattern, text, expected) in cases {
            assert_eq!(matches(pattern.as_bytes(), text.as_bytes()), *expected, "{pattern} ~ {text}");
        }
    }

    #[test]
    fn a_pattern_of_thousands_of_stars_matches_nothing_quickly() {
        let text = vec![b'a'; 50_000];
        let pattern = b"*?".repeat(50_000);
        assert!(!matches(&pattern, &text));
        assert!(matches(&b"*?".repeat(MAX_STARS), &text));
    }

    #[test]
    fn the_literal_prefix_stops_at_the_first_wildcard() {
        assert_eq!(literal_prefix(b"user:*"), b"user:");
        assert_eq!(literal_prefix(b"a\\*b?"), b"a*b");
        assert_eq!(literal_prefix(b"*x"), b"");
    }
}
