//! Models that place records on the pages of a segment: the optimal error-bounded
//! piecewise-linear regression (`plr`) and the segment model and planner built on it.

pub mod plr;
pub mod segment_model;

pub use plr::{LinearModel, Plr};
pub use segment_model::{plan_segments, PlanConfig, SegmentModel, SegmentPlan};
