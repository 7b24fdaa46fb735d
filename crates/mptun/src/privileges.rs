//! Dropping root once the tunnel is up (`interface.user`).
//!
//! Only setup needs privileges: creating the TUN device, binding sockets to
//! interfaces, forcing socket buffer sizes, adding routes and making the
//! status socket. Once they are done the daemon reads and writes file
//! descriptors it already holds, so it can run as an unprivileged user with
//! no capabilities at all. The routes it added go away with the TUN device
//! when the process exits, whoever it runs as.

use std::ffi::CString;

use anyhow::{bail, Context};

/// The user (and that user's primary group) the daemon runs as after setup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunAs {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

impl RunAs {
    /// Look `name` up in the user database.
    pub fn lookup(name: &str) -> Result<RunAs, String> {
        let c_name = CString::new(name).map_err(|_| format!("invalid user name {name:?}"))?;
        // SAFETY: passwd is plain data, valid when zeroed; getpwnam_r only
        // writes into `entry` and `buf` within the lengths given.
        let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        let mut buf = vec![0 as libc::c_char; 16 * 1024];
        let rc = unsafe {
            libc::getpwnam_r(
                c_name.as_ptr(),
                &mut entry,
                buf.as_mut_ptr(),
                buf.len(),
                &mut found,
            )
        };
        if rc != 0 {
            return Err(format!(
                "cannot look user {name:?} up: {}",
                std::io::Error::from_raw_os_error(rc)
            ));
        }
        if found.is_null() {
            return Err(format!("no user {name:?} on this system"));
        }
        if entry.pw_uid == 0 {
            return Err(format!(
                "user {name:?} is root: name an unprivileged user, or leave interface.user out"
            ));
        }
        Ok(RunAs {
            name: name.to_string(),
            uid: entry.pw_uid,
            gid: entry.pw_gid,
        })
    }

    /// Become this user, with its primary group only and no capabilities,
    /// in every thread of the process, for good.
    ///
    /// glibc applies set*id calls to all threads; leaving uid 0 without
    /// `PR_SET_KEEPCAPS` clears every thread's permitted and effective
    /// capabilities.
    pub fn become_user(&self) -> anyhow::Result<()> {
        let (uid, gid) = (self.uid, self.gid);
        // SAFETY: these calls take plain integers or a pointer to one live
        // gid_t, and change only the process's credentials.
        unsafe {
            if libc::setgroups(1, &gid) != 0 {
                return Err(std::io::Error::last_os_error()).context("setgroups");
            }
            if libc::setresgid(gid, gid, gid) != 0 {
                return Err(std::io::Error::last_os_error()).context("setresgid");
            }
            if libc::setresuid(uid, uid, uid) != 0 {
                return Err(std::io::Error::last_os_error()).context("setresuid");
            }
            // Getting root back must now be impossible.
            if libc::setresuid(0, 0, 0) == 0 {
                bail!("could go back to root after dropping to {:?}", self.name);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_is_looked_up_and_root_is_refused() {
        let nobody = RunAs::lookup("nobody").expect("nobody exists on Linux systems");
        assert_ne!(nobody.uid, 0);
        assert!(RunAs::lookup("root").unwrap_err().contains("is root"));
        assert!(RunAs::lookup("no-such-user-here")
            .unwrap_err()
            .contains("no user"));
        assert!(RunAs::lookup("a\0b").is_err());
    }
}
