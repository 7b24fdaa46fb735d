#!/usr/bin/env bash
# Acceptance benchmark and namespace tests of mptun-netem (needs root, ip, tc,
# iperf3, ping). Builds in release mode (the emulator must not be the
# bottleneck on a 2-core machine) and prints the (a), (b), (c) numbers.
#
#   crates/mptun-netem/scripts/bench.sh            # 10 s iperf3 runs
#   NETEM_BENCH_SECS=3 crates/mptun-netem/scripts/bench.sh
#
# Extra arguments go to the test binary (e.g. a test name filter).
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in ip tc iperf3 ping; do
    command -v "$tool" >/dev/null || { echo "missing $tool (apt-get install -y iproute2 iperf3 iputils-ping)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)" >&2; exit 1; }
exec cargo test --release -p mptun-netem --test lab -- --ignored --nocapture --test-threads=1 "$@"
