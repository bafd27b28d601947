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
