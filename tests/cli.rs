//! The `mptun` command as an operator uses it (no root needed).

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn mptun(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mptun"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run mptun");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("wait")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).trim().to_string()
}

#[test]
fn genkey_and_pubkey_speak_wg_format() {
    let private = stdout(&mptun(&["genkey"], ""));
    assert_eq!(private.len(), 44, "{private}");
    let other = stdout(&mptun(&["genkey"], ""));
    assert_ne!(private, other, "two keys alike");
    let public = mptun(&["pubkey"], &format!("{private}\n"));
    assert!(public.status.success());
    assert_eq!(stdout(&public).len(), 44);
    // RFC 7748 test vector, in the base64 form `wg pubkey` reads and prints.
    let known = mptun(&["pubkey"], "dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=");
    assert_eq!(
        stdout(&known),
        "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo="
    );
    let bad = mptun(&["pubkey"], "not a key");
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("private key on stdin"),
        "{}",
        stderr(&bad)
    );
}

fn write_config(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write config");
    path
}

const PEER: &str = "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=";

#[test]
fn check_accepts_the_shipped_configs() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["site-a.toml", "site-b.toml", "multi-uplink.toml"] {
        // The shipped configs name key files beside them; make stand-ins.
        let text = std::fs::read_to_string(root.join(name)).expect("read shipped config");
        let config = write_config(dir.path(), name, &text);
        for key in ["site-a.key", "site-b.key", "gw.key"] {
            let path = dir.path().join(key);
            std::fs::write(&path, "dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=\n").expect("key");
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        }
        let out = mptun(&["check", config.to_str().expect("utf-8 path")], "");
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        assert!(stderr(&out).is_empty(), "{name} warned: {}", stderr(&out));
    }
}

#[test]
fn check_names_the_file_and_key_of_a_bad_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(
        dir.path(),
        "site-a.toml",
        &format!(
            "[interface]\nprivate-key = \"{PEER}\"\n[peer]\npublic-key = \"{PEER}\"\n\
             [[path]]\nendpoint = \"192.0.2.1:51820\"\n[[path]]\nendpoint = \"192.0.2.1:51821\"\n\
             [[path]]\nendpoint = \"10.0.0.1\"\n"
        ),
    );
    let out = mptun(&["check", config.to_str().expect("utf-8 path")], "");
    assert!(!out.status.success());
    let message = stderr(&out);
    assert!(
        message.contains("site-a.toml: path[2].endpoint: invalid socket address \"10.0.0.1\""),
        "{message}"
    );
    assert_eq!(message.lines().count(), 1, "one clear error: {message}");
}

#[test]
fn up_with_a_missing_key_file_names_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(
        dir.path(),
        "site-a.toml",
        &format!(
            "[interface]\nprivate-key-file = \"missing.key\"\n[peer]\npublic-key = \"{PEER}\"\n\
             [[path]]\nendpoint = \"192.0.2.1:51820\"\n"
        ),
    );
    let out = mptun(&["up", config.to_str().expect("utf-8 path")], "");
    assert!(!out.status.success());
    let message = stderr(&out);
    let key_path = dir.path().join("missing.key");
    assert!(
        message.contains(&format!(
            "interface.private-key-file: cannot read {}",
            key_path.display()
        )),
        "{message}"
    );
}

#[test]
fn every_subcommand_has_help() {
    for sub in ["genkey", "pubkey", "check", "up", "show", "lab"] {
        let out = mptun(&[sub, "--help"], "");
        assert!(out.status.success(), "{sub} --help failed");
        assert!(
            stdout(&out).contains("Usage: mptun"),
            "{sub}: {}",
            stdout(&out)
        );
    }
}
