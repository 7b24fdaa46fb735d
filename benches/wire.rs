//! Trailer encode and decode, per packet.
//!
//! Every packet mptun sends gets a [`Trailer`] appended before encryption,
//! and every packet it receives has one read back from the end of the
//! authenticated plaintext, so both run once per packet on the hot path.
//! These benches bound what the trailer itself costs (it should be a few
//! nanoseconds, far below the WireGuard crypto of the `crypto` bench);
//! throughput is reported in packets (elements) per second.

use std::hint::black_box;

mod common;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mptun_core::{Kind, PathSet, Seq, Trailer, TRAILER_LEN};

/// Inner packet size the decode bench reads the trailer off: a full-size
/// packet, so the trailer sits where it does in real traffic.
const INNER_LEN: usize = 1420;

fn trailer() -> Trailer {
    Trailer {
        seq: Seq(0x0102_0304),
        path_seq: Seq(0x0000_1234),
        epoch: 0xdead_beef,
        sent_us: 100_000,
        previous_on_path: Some(Seq(0x0102_0300)),
        paths_in_use: PathSet(0b0111),
        kind: Kind::Data,
        congested: false,
        held: false,
    }
}

fn bench_wire(c: &mut Criterion) {
    let mut group = c.benchmark_group("wire");
    group.throughput(Throughput::Elements(1));

    group.bench_function("encode", |b| {
        let mut t = trailer();
        let mut buf = [0u8; TRAILER_LEN];
        b.iter(|| {
            // A new sequence number per packet, as the sender assigns them.
            t.seq = t.seq.next();
            black_box(&t).encode(black_box(&mut buf));
            black_box(&buf);
        });
    });

    let mut plaintext = vec![0u8; INNER_LEN + TRAILER_LEN];
    plaintext[0] = 0x45;
    trailer().encode(&mut plaintext[INNER_LEN..]);
    // Checked once, outside the timing: the bench must decode a valid trailer.
    assert_eq!(
        Trailer::decode_suffix(&plaintext),
        Ok((trailer(), INNER_LEN))
    );

    group.bench_function("decode", |b| {
        b.iter(|| black_box(Trailer::decode_suffix(black_box(&plaintext))));
    });

    group.finish();
}

criterion_group! {
    name = benches;
    config = common::quick().sample_size(30);
    targets = bench_wire
}
criterion_main!(benches);
