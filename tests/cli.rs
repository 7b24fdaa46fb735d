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

#[test]
fn genpsk_completions_and_the_man_page_come_from_the_cli() {
    let psk = stdout(&mptun(&["genpsk"], ""));
    assert_eq!(psk.len(), 44, "{psk}");
    assert_ne!(psk, stdout(&mptun(&["genpsk"], "")));
    let bash = mptun(&["completions", "bash"], "");
    assert!(bash.status.success());
    for word in ["reload", "import", "genpsk", "--dump"] {
        assert!(stdout(&bash).contains(word), "bash completion lacks {word}");
    }
    let man = mptun(&["man"], "");
    assert!(man.status.success());
    let page = stdout(&man);
    assert!(
        page.starts_with(".ie") || page.contains(".TH mptun 8"),
        "{page}"
    );
    assert!(page.contains("reload"), "{page}");
}

#[test]
fn wg_quick_configs_are_imported_and_the_result_checks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wg = |port: u16, table: &str| {
        format!(
            "[Interface]\nPrivateKey = dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=\n\
             ListenPort = {port}\nAddress = 10.9.0.1/24\n{table}\n[Peer]\n\
             PublicKey = hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=\n\
             AllowedIPs = 10.9.0.0/24\nEndpoint = 192.0.2.1:{port}\n"
        )
    };
    let wg0 = write_config(dir.path(), "wg0.conf", &wg(5000, ""));
    let wg1 = write_config(dir.path(), "wg1.conf", &wg(5001, "Table = off"));
    let imported = mptun(
        &["import", wg0.to_str().unwrap(), wg1.to_str().unwrap()],
        "",
    );
    assert!(imported.status.success(), "{}", stderr(&imported));
    let toml = write_config(dir.path(), "mptun0.toml", &stdout(&imported));
    let check = mptun(&["check", toml.to_str().unwrap()], "");
    assert!(check.status.success(), "{}", stderr(&check));
    assert!(stdout(&check).contains("2 path(s)"), "{}", stdout(&check));
    // `check` on a wg-quick file points at import and shows no key.
    let wrong = mptun(&["check", wg0.to_str().unwrap()], "");
    assert!(!wrong.status.success());
    assert!(
        stderr(&wrong).contains("mptun import"),
        "{}",
        stderr(&wrong)
    );
    assert!(!stderr(&wrong).contains("dwdtCnMY"), "{}", stderr(&wrong));
}
