#![no_main]
//! The write-batch codec (docs/format/write-batch.md): decoding never panics, and what decodes
//! re-encodes to the same bytes.

use libfuzzer_sys::fuzz_target;
use strata_core::batch_codec::{decode_batch, encode_batch};

fuzz_target!(|data: &[u8]| {
    if let Ok(batch) = decode_batch(data) {
        assert_eq!(encode_batch(&batch), data, "a decoded batch re-encodes differently");
    }
});
