//! Room for forecast inserts (§4.6, "Utilizing Forecasts"), left per planned segment and only
//! for the inserts a segment is forecast beyond its share.
//!
//! The paper lowers the goal of a whole reorganized range so that its pages, once the inserts
//! forecast for the next `f` epochs arrive, are filled to the goal. Inserts spread evenly over
//! the keys a store holds (how most users fill a store) are forecast on every range in
//! proportion to its records; room for `f` epochs of them makes every page of a small store
//! nearly empty (a store of `N` records gets `f·E/N` times its records forecast: 33× at the
//! paper's `f = 100`, `E = 100,000` and 300,000 records) while those pages would fill at the
//! same pace as any other, so the room buys nothing the goal's slack does not. And a
//! reorganized range holds cold and hot keys side by side: one goal for all of it makes the cold
//! pages sparse too.
//!
//! So a segment planned at the goal gets room only for its **excess**: the inserts forecast for
//! its keys minus its even share (the store's inserts per epoch × its records / the store's
//! records), and only when the forecast is at least `HOT_FACTOR` times that share (a forecast is
//! a count of one epoch's inserts, noisy around the share on evenly spread inserts). The store's
//! records are estimated as the pages the index references times the goal: stable from one
//! reorganization to the next, where the reorganized range's own records per page (overflowing
//! or sparse) put estimates of one store between 45,000 and 1.2 million. The room is for
//! `min(f, epochs completed)` epochs of that excess: as far ahead as the forecaster has looked
//! back, so a store that has seen one epoch does not plan for a hundred. The segment is then
//! planned again on its own at the goal `forecast::goal_for` gives. Evenly spread inserts thus
//! cost no room, and a hot spot gets its room on its own pages.

use crate::forecast::Forecaster;

/// A segment's forecast must be this many times its even share before it gets room: on evenly
/// spread inserts, one epoch's count per segment stays well within it.
pub(super) const HOT_FACTOR: f64 = 2.0;

/// What a reorganization knows about the inserts to come.
pub(super) struct InsertOutlook<'a> {
    forecaster: &'a Forecaster,
    /// Inserts per epoch each record of the store would see if they were spread evenly.
    even_inserts_per_record: f64,
    /// Epochs of excess inserts a hot segment gets room for.
    horizon_epochs: f64,
}

impl<'a> InsertOutlook<'a> {
    /// `None` before the first epoch ended (nothing is forecast yet). `store_records`
    /// estimates the records of the whole store.
    pub(super) fn new(forecaster: &'a Forecaster, store_records: f64, future_epochs: u32) -> Option<Self> {
        forecaster.frozen()?;
        let horizon_epochs = f64::from(future_epochs).min(forecaster.epochs_completed() as f64);
        Some(InsertOutlook {
            forecaster,
            even_inserts_per_record: forecaster.forecast(0, None, 1) / store_records.max(1.0),
            horizon_epochs,
        })
    }

    /// Inserts forecast over the horizon for the keys `lower .. upper_exclusive` beyond the even
    /// share of their `records` records; 0 unless the forecast is `HOT_FACTOR` times the share.
    pub(super) fn excess_inserts(&self, lower: &[u8], upper_exclusive: Option<&[u8]>, records: usize) -> f64 {
        let forecast = self.forecaster.forecast_keys(lower, upper_exclusive, 1);
        let share = self.even_inserts_per_record * records as f64;
        if forecast <= 0.0 || forecast < HOT_FACTOR * share {
            return 0.0;
        }
        (forecast - share) * self.horizon_epochs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forecast::ForecastConfig;

    fn forecaster_with(inserts: impl Iterator<Item = u64>, epoch_inserts: u64, epochs: u64) -> Forecaster {
        let config = ForecastConfig { epoch_inserts, partitions: 200, overestimation: 1.0, seed: 7 };
        let mut f = Forecaster::new(config).unwrap();
        let keys: Vec<u64> = inserts.take((epoch_inserts * epochs) as usize).collect();
        keys.into_iter().for_each(|k| f.record_insert(k));
        f
    }

    fn key(projection: u64) -> Vec<u8> {
        projection.to_be_bytes().to_vec()
    }

    /// Evenly spread inserts over a store of 10,000 records (one every 2^50 key values): no
    /// segment of 400 records gets room, though the paper's rule would forecast f·E/N = 100×
    /// its records for each.
    #[test]
    fn evenly_spread_inserts_get_no_room() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let spread = std::iter::from_fn(move || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            Some(x)
        });
        let f = forecaster_with(spread, 10_000, 3);
        let outlook = InsertOutlook::new(&f, 10_000.0, 100).unwrap();
        let step = u64::MAX / 25;
        for s in 0..24u64 {
            let excess = outlook.excess_inserts(&key(s * step), Some(&key((s + 1) * step)), 400);
            assert_eq!(excess, 0.0, "segment {s}");
        }
    }

    /// Every insert lands in one narrow gap: the segment holding it gets room for the horizon's
    /// excess (3 epochs completed: 3 × (1,000 − 40)), its neighbours none.
    #[test]
    fn a_hot_gap_gets_room_for_its_excess_over_the_epochs_seen() {
        let gap = 1u64 << 62;
        let mut i = 0u64;
        let hot = std::iter::from_fn(move || {
            i += 1;
            Some(gap + (i * 7919) % 1_000_000)
        });
        let f = forecaster_with(hot, 1_000, 3);
        let outlook = InsertOutlook::new(&f, 10_000.0, 100).unwrap();
        let excess = outlook.excess_inserts(&key(gap - 5), Some(&key(gap + (1 << 40))), 400);
        assert!((excess - 3.0 * 960.0).abs() < 1.0, "{excess}");
        assert_eq!(outlook.excess_inserts(&key(0), Some(&key(gap - 5)), 400), 0.0);
        assert_eq!(outlook.excess_inserts(&key(gap + (1 << 41)), None, 400), 0.0);
        assert!(crate::forecast::goal_for(400, excess, 20) < 20);
    }

    #[test]
    fn nothing_is_forecast_before_the_first_epoch_ends() {
        let f = forecaster_with(0u64.., 1_000, 0);
        assert!(InsertOutlook::new(&f, 10_000.0, 100).is_none());
        let f = forecaster_with(0u64.., 1_000, 1);
        assert_eq!(InsertOutlook::new(&f, 10_000.0, 100).unwrap().horizon_epochs, 1.0);
    }
}
