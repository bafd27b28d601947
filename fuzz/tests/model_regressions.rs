//! Inputs the `model_*` fuzz targets once failed on, replayed through the same harness
//! (`strata_fuzz::model_ops`): each must pass.

use strata::EngineKind;

/// `model_f2` in CI's fuzz smoke: a put of a 6,120-byte value (255 × 24, f2's largest value)
/// and then an rmw appending a byte — f2 refuses the grown value with `InvalidArgument`, and the
/// harness unwrapped that refusal. The harness's rmw now grows a value only below the largest put.
#[test]
fn model_f2_rmw_of_the_largest_value_is_not_grown_past_the_limit() {
    strata_fuzz::model_ops(EngineKind::F2, &[42, 255, 255, 37, 255]);
}

/// The harness's held scans on a point-in-time engine: a scan opened before an overwrite, a
/// delete and a new key yields the records as they were, both advanced and finished at the end.
#[test]
fn model_turtle_held_scans_see_the_store_as_it_began() {
    let ops: &[u8] = &[
        0, 1, 10, // put k01
        0, 2, 10, // put k02
        22, 0, // hold a scan from k00
        0, 1, 20, // overwrite k01
        3, 2, // delete k02
        0, 3, 5, // put k03
        230, 0, // advance the held scan by 10
        22, 0, // hold a second scan
        3, 1, // delete k01
    ];
    strata_fuzz::model_ops(EngineKind::Turtle, ops);
}

/// laser's table model on a few pseudo-random inputs: every kind of operation, column vectors
/// in batches of every size, layout changes and reopens.
#[test]
fn model_laser_table_runs_pseudo_random_inputs() {
    for seed in 1..=4u64 {
        let mut x = seed;
        let data: Vec<u8> = (0..6_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        strata_fuzz::laser_table_ops(&data);
    }
}
