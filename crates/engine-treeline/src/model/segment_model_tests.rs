use proptest::prelude::*;

use super::*;
use crate::key_projection::project;

fn model(slope: f64, intercept: f64, pages: u8) -> SegmentModel {
    SegmentModel { prefix_len: 0, base: 100, slope, intercept, pages }
}

fn config(goal: usize, epsilon: u32, cap: usize) -> PlanConfig {
    PlanConfig { goal, epsilon, max_records_per_page: cap, prefix_len: 2, max_segment_pages: 16 }
}

/// Checks every guarantee of `plan_segments` on `keys` and returns the plans.
fn check_plan(keys: &[u64], cfg: PlanConfig) -> Vec<SegmentPlan> {
    let plans = plan_segments(keys, cfg).unwrap();
    let mut next = 0;
    for plan in &plans {
        assert_eq!(plan.first_index, next, "plans cover the records contiguously");
        assert!(plan.record_count >= 1);
        assert!(plan.record_count <= plan.page_count * cfg.goal);
        assert!([1, 2, 4, 8, 16].contains(&plan.page_count));
        let records = &keys[next..next + plan.record_count];
        next += plan.record_count;
        let Some(m) = plan.model else {
            assert_eq!(plan.page_count, 1);
            assert!(plan.record_count <= cfg.goal);
            continue;
        };
        assert!(m.is_well_formed() && usize::from(m.pages) == plan.page_count);
        assert_eq!(m.prefix_len, cfg.prefix_len);
        let mut per_page = vec![0usize; plan.page_count];
        for &x in records {
            per_page[m.page_for(x)] += 1;
        }
        assert!(per_page.iter().all(|&n| n <= cfg.max_records_per_page), "overfull page: {per_page:?}");
        let b = plan.page_boundaries();
        assert!(b.windows(2).all(|w| w[0] < w[1]), "boundaries {b:?}");
        for &x in records {
            let p = m.page_for(x);
            assert!(x >= b[p] && b.get(p + 1).is_none_or(|&n| x < n));
        }
        check_key_fences(plan, records, &m);
    }
    assert_eq!(next, keys.len());
    plans
}

/// Byte keys `"pp" ++ x.to_be_bytes()`: fences from the plan are strictly increasing, and the
/// fences pick the same page as the model for every record key and for probe keys.
fn check_key_fences(plan: &SegmentPlan, records: &[u64], m: &SegmentModel) {
    let key = |x: u64| [&b"pp"[..], &x.to_be_bytes()].concat();
    let lower = key(records[0]);
    let fences = plan.page_lower_fences(b"pp", &lower);
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "fences not increasing");
    let last = key(*records.last().unwrap());
    assert!(*fences.last().unwrap() <= last, "last page's range is non-empty");
    let probes = records.iter().flat_map(|&x| [x, x.saturating_add(1), x.saturating_sub(1)]);
    for x in probes.filter(|&x| x >= records[0]) {
        let k = key(x);
        let by_fence = fences.iter().rposition(|f| *f <= k).unwrap();
        assert_eq!(by_fence, m.page_for_key(&k), "x={x}");
        assert_eq!(project(&k, 2), x);
    }
}

#[test]
fn page_for_clamps_and_survives_odd_inputs() {
    let m = model(0.5, 0.25, 4);
    assert_eq!(m.page_for(0), 0, "below the base saturates to the base");
    assert_eq!(m.page_for(100), 0);
    assert_eq!(m.page_for(102), 1);
    assert_eq!(m.page_for(105), 2);
    assert_eq!(m.page_for(u64::MAX), 3, "clamped to the last page");
    assert_eq!(model(0.0, -5.0, 2).page_for(1000), 0);
    assert_eq!(model(f64::NAN, 0.0, 2).page_for(1000), 0);
    assert_eq!(model(f64::INFINITY, 0.0, 8).page_for(1000), 7);
    assert!(!model(f64::NAN, 0.0, 2).is_well_formed());
    assert!(!model(-1.0, 0.0, 2).is_well_formed());
    assert!(!model(1.0, 0.0, 3).is_well_formed());
    assert_eq!(model(1.0, 0.0, 4).page_for_key(&[0, 0, 0, 0, 0, 0, 0, 102]), 2);
}

#[test]
fn dense_keys_make_sixteen_page_segments() {
    let keys: Vec<u64> = (0..1000).map(|i| i * 10).collect();
    let plans = check_plan(&keys, config(20, 3, 30));
    assert_eq!(plans[0].page_count, 16);
    assert_eq!(plans[0].record_count, 320);
    assert_eq!(plans[1].first_index, 320);
    let last = plans.last().unwrap();
    assert_eq!(last.first_index + last.record_count, 1000);
}

#[test]
fn leftovers_round_down_to_a_power_of_two() {
    // 10 pages' worth of linear keys: an 8-page segment, then the rest.
    let keys: Vec<u64> = (0..100).collect();
    let plans = check_plan(&keys, config(10, 2, 14));
    assert_eq!((plans[0].page_count, plans[0].record_count), (8, 80));
    assert_eq!((plans[1].page_count, plans[1].record_count), (2, 20));
}

#[test]
fn small_sets_fit_one_page_without_a_model() {
    let plans = check_plan(&[5, 6, 7], config(4, 1, 4));
    assert_eq!(plans, vec![SegmentPlan { first_index: 0, record_count: 3, page_count: 1, model: None }]);
    assert!(plan_segments(&[], config(4, 1, 4)).unwrap().is_empty());
}

#[test]
fn rejects_bad_parameters_and_unsorted_keys() {
    assert!(plan_segments(&[1], config(0, 1, 4)).is_err());
    assert!(plan_segments(&[1], config(4, 0, 4)).is_err());
    assert!(plan_segments(&[1], config(4, 1, 3)).is_err());
    assert!(plan_segments(&[2, 1], config(4, 1, 4)).is_err());
}

#[test]
fn runs_of_equal_projections_stay_on_one_page() {
    let mut keys = Vec::new();
    for x in 0..60u64 {
        let run = if x % 7 == 0 { 3 } else { 1 };
        keys.extend(std::iter::repeat_n(x * 1000, run));
    }
    check_plan(&keys, config(8, 2, 12));
    // A run longer than a page can only be split across one-page segments.
    let keys = vec![42u64; 50];
    let plans = check_plan(&keys, config(8, 2, 12));
    assert!(plans.iter().all(|p| p.page_count == 1));
}

#[test]
fn capacity_equal_to_goal_forces_fallbacks_but_never_overflows() {
    let keys: Vec<u64> = (0..500u64).map(|i| i * i).collect();
    check_plan(&keys, config(10, 3, 10));
}

fn keyset() -> impl Strategy<Value = Vec<u64>> {
    prop_oneof![
        proptest::collection::vec(any::<u64>(), 0..400),
        proptest::collection::vec(0u64..2000, 0..400),
        proptest::collection::vec(prop_oneof![9 => 0u64..50, 1 => 1u64 << 30..1u64 << 60], 0..400),
        (0u64..1000, 1u64..100, 0usize..400).prop_map(|(s, g, n)| (0..n as u64).map(|i| s + i * g).collect()),
        proptest::collection::vec(0u32..63, 0..200).prop_map(|e| e.into_iter().map(|e| 1u64 << e).collect()),
    ]
    .prop_map(|mut v| {
        v.sort_unstable();
        v
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn plans_never_overfill_a_page(keys in keyset(), goal in 1usize..40, eps in 1u32..8, slack in 0usize..20) {
        check_plan(&keys, config(goal, eps, goal + slack));
    }
}

#[test]
fn page_grouping_off_plans_only_one_page_segments() {
    let keys: Vec<u64> = (0..2_000u64).map(|i| i * 1_000).collect();
    let grouped = plan_segments(&keys, config(40, 5, 60)).unwrap();
    assert!(grouped.iter().any(|p| p.page_count > 1), "linear keys make multi-page segments");
    let single = plan_segments(&keys, PlanConfig { max_segment_pages: 1, ..config(40, 5, 60) }).unwrap();
    assert!(single.iter().all(|p| p.page_count == 1 && p.model.is_none()));
    assert_eq!(single.iter().map(|p| p.record_count).sum::<usize>(), keys.len());
}

/// The plain binary search over `base ..= u64::MAX` that the bracketed one must agree with.
fn first_projection_by_plain_search(model: &SegmentModel, page: usize) -> Option<u64> {
    if model.page_for(u64::MAX) < page {
        return None;
    }
    let (mut lo, mut hi) = (model.base, u64::MAX);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if model.page_for(mid) >= page {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(lo)
}

proptest! {
    /// The search bracketed around the model's inverse finds exactly what a search over the
    /// whole projection space finds, for slopes from 2^-64 to 2^4 pages per unit, any base and
    /// intercept.
    #[test]
    fn page_boundaries_bracketed_match_a_plain_search(
        base in any::<u64>(),
        slope_log2 in -64i32..4,
        slope_mantissa in 1.0f64..2.0,
        intercept in -40.0f64..40.0,
        pages in prop::sample::select(vec![2u8, 4, 8, 16]),
    ) {
        let slope = slope_mantissa * 2f64.powi(slope_log2);
        let m = SegmentModel { prefix_len: 0, base, slope, intercept, pages };
        for page in 1..usize::from(pages) {
            prop_assert_eq!(first_projection_on_or_after(&m, page), first_projection_by_plain_search(&m, page));
        }
    }
}

#[test]
fn page_boundaries_of_a_flat_model_are_the_base_or_absent() {
    let flat = SegmentModel { prefix_len: 0, base: 7, slope: 0.0, intercept: 1.5, pages: 4 };
    assert_eq!(first_projection_on_or_after(&flat, 1), Some(7));
    assert_eq!(first_projection_on_or_after(&flat, 2), None);
}
