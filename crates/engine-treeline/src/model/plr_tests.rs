use proptest::prelude::*;

use super::*;

/// Greedy segmentation: each segment is a maximal run of points the builder accepts.
fn greedy(points: &[(u64, u64)], eps: u32) -> Vec<(usize, LinearModel)> {
    let mut out = Vec::new();
    let mut plr = Plr::new(eps).unwrap();
    let mut start = 0;
    for (i, &(x, y)) in points.iter().enumerate() {
        if !plr.add_point(x, y) {
            out.push((i - start, plr.finish().unwrap()));
            plr.reset();
            start = i;
            assert!(plr.add_point(x, y), "a fresh builder takes any point");
        }
    }
    if let Some(m) = plr.finish() {
        out.push((points.len() - start, m));
    }
    out
}

fn check_bound(points: &[(u64, u64)], eps: u32) -> usize {
    let segments = greedy(points, eps);
    let mut i = 0;
    for (len, model) in &segments {
        for &(x, y) in &points[i..i + len] {
            let err = (model.predict(x) - y as f64).abs();
            assert!(err <= f64::from(eps), "x={x} y={y} err={err} eps={eps} model={model:?}");
        }
        i += len;
    }
    assert_eq!(i, points.len());
    segments.len()
}

/// Exact feasibility with the builder's bound `ε − 1/SCALE`: by Helly's theorem (strips in the
/// (slope, intercept) plane) a set is feasible iff every three points are, and three points are
/// iff the middle one is within `2ε` of the chord through the outer two.
fn feasible(points: &[(u64, u64)], eps: u32) -> bool {
    let e2 = 2 * (i128::from(eps) * SCALE - 1);
    let p: Vec<(i128, i128)> = points.iter().map(|&(x, y)| (i128::from(x), i128::from(y) * SCALE)).collect();
    for i in 0..p.len() {
        for j in i + 1..p.len() {
            for k in j + 1..p.len() {
                let ((xi, yi), (xj, yj), (xk, yk)) = (p[i], p[j], p[k]);
                let d = yj * (xk - xi) - (yi * (xk - xj) + yk * (xj - xi));
                if d.abs() > e2 * (xk - xi) {
                    return false;
                }
            }
        }
    }
    true
}

fn minimum_segments(points: &[(u64, u64)], eps: u32) -> usize {
    let n = points.len();
    let mut best = vec![usize::MAX; n + 1];
    best[0] = 0;
    for end in 1..=n {
        for start in 0..end {
            if best[start] != usize::MAX && feasible(&points[start..end], eps) {
                best[end] = best[end].min(best[start] + 1);
            }
        }
    }
    best[n]
}

/// Strictly increasing x from gaps, monotone y from steps.
fn points_from(gaps: &[u64], steps: &[u64], start: u64) -> Vec<(u64, u64)> {
    let mut x = start;
    let mut y = 0u64;
    let mut out = Vec::new();
    for (i, (&g, &s)) in gaps.iter().zip(steps).enumerate() {
        if i > 0 {
            let Some(nx) = x.checked_add(g.max(1)) else { break };
            x = nx;
            y += s;
        }
        out.push((x, y));
    }
    out
}

#[test]
fn collinear_points_make_one_segment() {
    let pts: Vec<(u64, u64)> = (0..1000).map(|i| (i * 7 + 3, i)).collect();
    assert_eq!(check_bound(&pts, 1), 1);
    let m = greedy(&pts, 1)[0].1;
    assert!((m.slope - 1.0 / 7.0).abs() < 1e-9);
    assert_eq!(m.origin, 3);
}

#[test]
fn refused_point_leaves_state_unchanged() {
    let mut plr = Plr::new(1).unwrap();
    for i in 0..10 {
        assert!(plr.add_point(i, i));
    }
    let before = plr.finish();
    assert!(!plr.add_point(10, 100));
    assert!(!plr.add_point(9, 9), "x must increase");
    assert!(!plr.add_point(11, MAX_Y + 1));
    assert_eq!(plr.finish(), before);
    assert_eq!(plr.len(), 10);
    assert!(plr.add_point(10, 10));
}

#[test]
fn epsilon_zero_is_refused_and_single_points_are_exact() {
    assert!(Plr::new(0).is_err());
    let mut plr = Plr::new(3).unwrap();
    assert!(plr.finish().is_none() && plr.is_empty());
    assert!(plr.add_point(u64::MAX, 17));
    let m = plr.finish().unwrap();
    assert_eq!((m.slope, m.predict(u64::MAX)), (0.0, 17.0));
}

#[test]
fn ranges_cover_runs_of_equal_projections() {
    let mut plr = Plr::new(2).unwrap();
    assert!(plr.add_range(10, 0, 3), "a run of 4 fits 2ε = 4");
    assert!(!plr.add_range(20, 4, 9), "a run of 6 does not");
    assert!(plr.add_range(20, 4, 5));
    assert!(plr.add_range(30, 6, 6));
    let m = plr.finish().unwrap();
    for (x, lo, hi) in [(10, 0, 3), (20, 4, 5), (30, 6, 6)] {
        for y in lo..=hi {
            assert!((m.predict(x) - y as f64).abs() <= 2.0, "x={x} y={y} {m:?}");
        }
    }
    assert!(!Plr::new(1).unwrap().add_range(0, 0, 2), "a run wider than 2ε never fits");
    assert!(!Plr::new(1).unwrap().add_range(0, 3, 2));
}

#[test]
fn exact_boundary_needs_the_slack() {
    // (0,0), (1,2), (2,0) needs error exactly 1: refused with ε = 1 (bound is 1 − 1/256).
    let mut plr = Plr::new(1).unwrap();
    assert!(plr.add_point(0, 0) && plr.add_point(1, 2));
    assert!(!plr.add_point(2, 0));
    assert!(!feasible(&[(0, 0), (1, 2), (2, 0)], 1));
    assert!(feasible(&[(0, 0), (1, 2), (2, 0)], 2));
}

#[test]
fn huge_x_ranges_keep_the_bound() {
    let pts: Vec<(u64, u64)> = (0..200u64).map(|i| (i * (u64::MAX / 200), i)).collect();
    check_bound(&pts, 1);
    let pts: Vec<(u64, u64)> = (0..64u64).map(|i| ((1u64 << i) - 1, i)).collect();
    check_bound(&pts, 2);
    let pts: Vec<(u64, u64)> = (0..300u64).map(|i| (u64::MAX - 300 + i, i * 1000)).collect();
    check_bound(&pts, 4);
}

#[test]
fn sorted_records_give_non_negative_slopes() {
    // The average of the extreme lines would be negative here; slope 0 is feasible.
    let pts = [(0u64, 0u64), (1, 1), (1_000_000, 2)];
    let m = greedy(&pts, 1);
    assert_eq!(m.len(), 1);
    assert!(m[0].1.slope >= 0.0, "{:?}", m[0].1);
    check_bound(&pts, 1);
}

fn shape() -> impl Strategy<Value = Vec<(u64, u64)>> {
    let n = 2usize..60;
    prop_oneof![
        // uniform gaps, one record per point
        (n.clone(), 1u64..1000).prop_map(|(n, g)| points_from(&vec![g; n], &vec![1; n], 5)),
        // random gaps
        proptest::collection::vec(1u64..1_000_000, 2..60).prop_map(|g| {
            let n = g.len();
            points_from(&g, &vec![1; n], 0)
        }),
        // clustered: small gaps with occasional huge jumps
        proptest::collection::vec(prop_oneof![9 => 1u64..4, 1 => 1u64 << 40..1u64 << 50], 2..60).prop_map(
            |g| {
                let n = g.len();
                points_from(&g, &vec![1; n], 0)
            }
        ),
        // sequential keys
        n.clone().prop_map(|n| (0..n as u64).map(|i| (i, i)).collect()),
        // exponential gaps
        proptest::collection::vec(0u32..62, 2..60).prop_map(|e| {
            let g: Vec<u64> = e.iter().map(|&e| 1u64 << e).collect();
            let n = g.len();
            points_from(&g, &vec![1; n], 0)
        }),
        // huge u64 range with arbitrary steps in y
        proptest::collection::vec((1u64..u64::MAX / 64, 0u64..5), 2..60).prop_map(|v| {
            let (g, s): (Vec<u64>, Vec<u64>) = v.into_iter().unzip();
            points_from(&g, &s, 1 << 20)
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn every_point_is_within_epsilon(points in shape(), eps in 1u32..20) {
        check_bound(&points, eps);
    }

    #[test]
    fn greedy_is_optimal_and_each_segment_maximal(points in shape(), eps in 1u32..4) {
        let points = &points[..points.len().min(14)];
        let segments = greedy(points, eps);
        prop_assert_eq!(segments.len(), minimum_segments(points, eps));
        let mut i = 0;
        for (len, _) in &segments {
            prop_assert!(feasible(&points[i..i + len], eps));
            if i + len < points.len() {
                prop_assert!(!feasible(&points[i..=i + len], eps), "segment at {} is not maximal", i);
            }
            i += len;
        }
    }

    #[test]
    fn arbitrary_y_is_covered_too(
        v in proptest::collection::vec((1u64..1 << 40, 0u64..1 << 20), 2..40), eps in 1u32..50,
    ) {
        let mut x = 0u64;
        let points: Vec<(u64, u64)> = v.iter().map(|&(g, y)| { x += g; (x, y) }).collect();
        check_bound(&points, eps);
        let small = &points[..points.len().min(10)];
        prop_assert_eq!(greedy(small, eps).len(), minimum_segments(small, eps));
    }
}
