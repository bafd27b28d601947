//! `DeferredParts`: a lazy merge source made of parts in key order (a segment's per-pivot
//! pieces, a node's children), each announced by the first key it may hold and opened only
//! when the merge gets there (`Sourced::NotBefore`, merge.rs).

use strata_core::{Key, Result};

use super::merge::{LazyIter, Sourced};

/// Opens one part.
pub type OpenPart<'a> = Box<dyn FnOnce() -> LazyIter<'a> + Send + 'a>;

/// Parts in the merge's direction, each with the first key it may hold (`None`: open it at
/// once). A part must hold nothing before its key, and nothing before the previous part's end.
pub struct DeferredParts<'a, P> {
    parts: P,
    current: Option<LazyIter<'a>>,
    /// A part announced and not opened yet.
    announced: Option<OpenPart<'a>>,
}

impl<'a, P> DeferredParts<'a, P>
where
    P: Iterator<Item = (Option<Key>, OpenPart<'a>)> + Send + 'a,
{
    pub fn new(parts: P) -> DeferredParts<'a, P> {
        DeferredParts { parts, current: None, announced: None }
    }

    pub fn boxed(parts: P) -> LazyIter<'a> {
        Box::new(DeferredParts::new(parts))
    }
}

impl<'a, P> Iterator for DeferredParts<'a, P>
where
    P: Iterator<Item = (Option<Key>, OpenPart<'a>)> + Send + 'a,
{
    type Item = Result<Sourced>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(open) = self.announced.take() {
                self.current = Some(open());
            }
            if let Some(current) = &mut self.current {
                match current.next() {
                    Some(item) => return Some(item),
                    None => self.current = None,
                }
            }
            let (first_key, open) = self.parts.next()?;
            match first_key {
                Some(key) => {
                    self.announced = Some(open);
                    return Some(Ok(Sourced::NotBefore(key)));
                }
                None => self.current = Some(open()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    use strata_core::Direction;

    use super::*;
    use crate::sorted_run::{eager, Entry, MergeIter, MergeOutput};

    type Layer = BTreeMap<Key, Entry>;

    fn random_layer(rng: &mut SmallRng) -> Layer {
        (0..rng.gen_range(0..300))
            .map(|_| {
                let key = format!("{:05}", rng.gen_range(0..2_000)).into_bytes();
                let entry = if rng.gen_bool(0.2) { Entry::delete() } else { Entry::put(vec![rng.gen()]) };
                (key, entry)
            })
            .collect()
    }

    fn entries(layer: &Layer, direction: Direction) -> Vec<(Key, Entry)> {
        let mut out: Vec<_> = layer.iter().map(|(k, e)| (k.clone(), e.clone())).collect();
        if direction == Direction::Reverse {
            out.reverse();
        }
        out
    }

    /// `layer` cut at random keys into parts, each announced by its bound nearest the start of
    /// the direction (a lower bound forward, an upper bound in reverse); `opened` counts opens.
    fn in_parts<'a>(
        layer: &Layer,
        direction: Direction,
        rng: &mut SmallRng,
        opened: &'a AtomicUsize,
    ) -> LazyIter<'a> {
        let mut cuts: Vec<Key> = (0..rng.gen_range(0..8))
            .map(|_| format!("{:05}", rng.gen_range(0..2_000)).into_bytes())
            .collect();
        cuts.sort();
        cuts.dedup();
        let mut bounds: Vec<(Option<Key>, Option<Key>)> = Vec::new();
        let mut lower = None;
        for cut in cuts {
            bounds.push((lower.clone(), Some(cut.clone())));
            lower = Some(cut);
        }
        bounds.push((lower, None));
        if direction == Direction::Reverse {
            bounds.reverse();
        }
        let parts: Vec<(Option<Key>, OpenPart<'a>)> = bounds
            .into_iter()
            .enumerate()
            .map(|(i, (lower, upper))| {
                let part: Layer = layer
                    .iter()
                    .filter(|(k, _)| {
                        lower.as_ref().is_none_or(|l| *k >= l) && upper.as_ref().is_none_or(|u| *k < u)
                    })
                    .map(|(k, e)| (k.clone(), e.clone()))
                    .collect();
                let announced = match direction {
                    Direction::Forward => lower,
                    Direction::Reverse => upper,
                };
                let open: OpenPart<'a> = Box::new(move || {
                    opened.fetch_add(1, Relaxed);
                    eager(Box::new(entries(&part, direction).into_iter().map(Ok)))
                });
                (if i == 0 { None } else { announced }, open)
            })
            .collect();
        DeferredParts::boxed(parts.into_iter())
    }

    #[test]
    fn lazy_and_nested_merges_yield_what_an_eager_merge_does() {
        let mut rng = SmallRng::seed_from_u64(5);
        for round in 0..200 {
            let layers: Vec<Layer> = (0..4).map(|_| random_layer(&mut rng)).collect();
            for direction in [Direction::Forward, Direction::Reverse] {
                let eager_sources = layers.iter().map(|l| -> crate::sorted_run::SourceIter<'_> {
                    Box::new(entries(l, direction).into_iter().map(Ok))
                });
                let expected: Vec<_> =
                    MergeIter::new(eager_sources.collect(), direction, MergeOutput::Visible)
                        .map(Result::unwrap)
                        .collect();
                let opened = AtomicUsize::new(0);
                // The two oldest layers as a merge of their own inside the outer one, as a
                // tree node's range sits inside the engine's merge.
                let inner = MergeIter::lazy(
                    vec![
                        in_parts(&layers[2], direction, &mut rng, &opened),
                        in_parts(&layers[3], direction, &mut rng, &opened),
                    ],
                    direction,
                    MergeOutput::Visible,
                )
                .into_lazy();
                let outer = vec![
                    in_parts(&layers[0], direction, &mut rng, &opened),
                    in_parts(&layers[1], direction, &mut rng, &opened),
                    inner,
                ];
                let got: Vec<_> =
                    MergeIter::lazy(outer, direction, MergeOutput::Visible).map(Result::unwrap).collect();
                assert_eq!(got, expected, "round {round} {direction:?}");
            }
        }
    }

    #[test]
    fn a_merge_that_stops_early_opens_no_part_beyond_where_it_stopped() {
        let layer: Layer =
            (0..1_000).map(|i| (format!("{i:05}").into_bytes(), Entry::put(vec![1]))).collect();
        let opened = AtomicUsize::new(0);
        let parts: Vec<(Option<Key>, OpenPart<'_>)> = (0..10)
            .map(|p| {
                let part: Vec<(Key, Entry)> =
                    entries(&layer, Direction::Forward)[p * 100..(p + 1) * 100].to_vec();
                let first = (p > 0).then(|| part[0].0.clone());
                let opened = &opened;
                let open: OpenPart<'_> = Box::new(move || {
                    opened.fetch_add(1, Relaxed);
                    eager(Box::new(part.into_iter().map(Ok)))
                });
                (first, open)
            })
            .collect();
        let other: Vec<(Key, Entry)> = vec![(b"00150x".to_vec(), Entry::put(vec![2]))];
        let sources =
            vec![eager(Box::new(other.into_iter().map(Ok))), DeferredParts::boxed(parts.into_iter())];
        // The first two parts and the other source: 201 entries, the last 00199, which ends
        // part 1; an eager concatenation would open part 2 to find the next head.
        let got: Vec<_> = MergeIter::lazy(sources, Direction::Forward, MergeOutput::Visible)
            .take(201)
            .map(Result::unwrap)
            .collect();
        assert_eq!(got.last().map(|(k, _)| k.as_slice()), Some(&b"00199"[..]));
        assert_eq!(opened.load(Relaxed), 2, "part 2 starts past where the merge stopped");
    }

    #[test]
    fn a_part_that_fails_when_opened_ends_the_merge_before_any_later_entry() {
        let entry = |k: &[u8]| Ok((k.to_vec(), Entry::put(vec![1])));
        let other = eager(Box::new(vec![entry(b"a"), entry(b"z")].into_iter()));
        let parts: Vec<(Option<Key>, OpenPart<'_>)> = vec![
            (None, Box::new(move || eager(Box::new(vec![entry(b"b")].into_iter())))),
            (
                Some(b"m".to_vec()),
                Box::new(|| {
                    eager(Box::new(std::iter::once(Err(strata_core::Error::corruption("run", 7, "bad")))))
                }),
            ),
        ];
        let items: Vec<_> = MergeIter::lazy(
            vec![other, DeferredParts::boxed(parts.into_iter())],
            Direction::Forward,
            MergeOutput::Visible,
        )
        .collect();
        assert_eq!(items.len(), 3, "{items:?}");
        assert_eq!(items[0].as_ref().unwrap().0, b"a");
        assert_eq!(items[1].as_ref().unwrap().0, b"b");
        assert!(items[2].is_err(), "{items:?}");
    }
}
