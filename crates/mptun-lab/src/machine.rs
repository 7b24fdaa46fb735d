//! One lab per host. Two labs at once share things that are not per
//! namespace (wireguard-go's control sockets in `/var/run/wireguard` are
//! named after the interface, the same in every lab), and each would
//! measure the other's load: the second fails in ways that do not say why
//! ("no control socket", "Network is unreachable"), or measures nonsense.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::Path;

use anyhow::Context;

/// Where the lock is held, with the holder's pid in it.
const LOCK_FILE: &str = "/run/mptun-lab.lock";

/// The host's lab, held until dropped (or the process exits: the kernel
/// releases the lock of a killed process too).
#[derive(Debug)]
pub struct MachineLock {
    _file: File,
}

impl MachineLock {
    /// Take the host's lab, or fail naming the process that has it.
    pub fn take() -> anyhow::Result<MachineLock> {
        Self::take_at(Path::new(LOCK_FILE), false)
    }

    /// Take the host's lab, waiting while another process has it (tests,
    /// which run one after another anyway).
    pub fn wait() -> anyhow::Result<MachineLock> {
        Self::take_at(Path::new(LOCK_FILE), true)
    }

    fn take_at(path: &Path, wait: bool) -> anyhow::Result<MachineLock> {
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .with_context(|| format!("open {}", path.display()))?;
        let mut operation = libc::LOCK_EX;
        if !wait {
            operation |= libc::LOCK_NB;
        }
        // SAFETY: flock on a descriptor we own; no memory is passed.
        if unsafe { libc::flock(file.as_raw_fd(), operation) } != 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::WouldBlock {
                return Err(err).with_context(|| format!("lock {}", path.display()));
            }
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            anyhow::bail!(
                "another lab is running on this host (pid {}, per {}): \
                 two at once share wireguard-go's control sockets and the CPU; \
                 wait for it or stop it",
                if holder.is_empty() { "unknown" } else { holder },
                path.display()
            );
        }
        file.set_len(0)?;
        file.rewind()?;
        writeln!(file, "{}", std::process::id())?;
        Ok(MachineLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lab_is_refused_with_the_first_ones_pid_until_the_first_ends() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("lab.lock");
        let first = MachineLock::take_at(&path, false).expect("first lab");
        let refused = MachineLock::take_at(&path, false).expect_err("second lab refused");
        let message = format!("{refused:#}");
        assert!(
            message.contains(&format!("pid {}", std::process::id())),
            "{message}"
        );
        drop(first);
        MachineLock::take_at(&path, false).expect("the lab is free again");
    }
}
