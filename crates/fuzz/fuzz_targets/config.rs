//! The config parser, on any text: an error or a config, never a panic.
//! Host names resolve to a documentation address, with no lookup.
#![no_main]

use std::net::SocketAddr;
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use mptun::config::Config;

fuzz_target!(|text: &str| {
    // Key files are read from disk; a device file such as /dev/zero would
    // never end. What reads them is tested apart.
    if text.contains("-file") {
        return;
    }
    let resolve = |_: &str| -> Result<SocketAddr, String> { Ok("192.0.2.1:51820".parse().unwrap()) };
    let _ = Config::parse_with(text, "fuzz.toml", Path::new("/nonexistent"), &resolve);
});
