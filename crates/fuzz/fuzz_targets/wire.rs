//! Every decoder of bytes that come from a path: the trailer, a probe, a
//! probe train's packet, a NACK, a parity half. None may panic; what decodes must encode back to what it was read
//! from.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mptun_core::wire::{
    Nack, Parity, Probe, Trailer, Train, NACK_MAX_LEN, PARITY_HEADER_LEN, TRAILER_LEN,
};

fuzz_target!(|data: &[u8]| {
    if let Ok((trailer, body_len)) = Trailer::decode_suffix(data) {
        assert_eq!(body_len + TRAILER_LEN, data.len());
        let mut bytes = [0u8; TRAILER_LEN];
        trailer.encode(&mut bytes);
        assert_eq!(Trailer::decode_suffix(&bytes).ok(), Some((trailer, 0)));
    }
    if let Ok(probe) = Probe::decode(data) {
        let mut bytes = vec![0u8; Probe::LEN];
        probe.encode(&mut bytes);
        assert_eq!(Probe::decode(&bytes).ok(), Some(probe));
    }
    if let Ok(train) = Train::decode(data) {
        let mut bytes = vec![0u8; data.len()];
        assert_eq!(train.encode(&mut bytes, data.len()), data.len());
        assert_eq!(Train::decode(&bytes).ok(), Some(train));
    }
    if let Ok(half) = Parity::decode(data) {
        let mut bytes = vec![0u8; PARITY_HEADER_LEN + half.bytes.len()];
        assert_eq!(half.encode(&mut bytes), bytes.len());
        assert_eq!(Parity::decode(&bytes).ok(), Some(half));
    }
    if let Ok(nack) = Nack::decode(data) {
        let seqs: Vec<_> = nack.seqs().collect();
        let mut bytes = vec![0u8; NACK_MAX_LEN];
        if seqs.len() <= mptun_core::wire::NACK_MAX {
            let n = Nack::encode(nack.epoch, &seqs, &mut bytes);
            let again = Nack::decode(&bytes[..n]).expect("an encoded NACK decodes");
            assert_eq!(again.epoch, nack.epoch);
            assert!(again.seqs().eq(seqs.iter().copied()));
        }
    }
});
