use std::path::Path;

use super::*;

const KEY_A: &str = "dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=";
const KEY_B: &str = "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=";

fn valid() -> String {
    format!(
        r#"
[interface]
private-key = "{KEY_A}"
address = ["10.77.0.1/24"]

[peer]
public-key = "{KEY_B}"
allowed-ips = ["10.77.0.0/24", "192.168.20.0/24"]
persistent-keepalive = 10

[[path]]
listen-port = 51820
endpoint = "198.51.100.2:51820"

[[path]]
listen-port = 51821
endpoint = "198.51.100.2:51821"

[[path]]
listen-port = 51822
endpoint = "198.51.100.2:51822"
"#
    )
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, "site-a.toml", Path::new("/nonexistent")).map(|(c, _)| c)
}

fn error_of(text: &str) -> String {
    match parse(text) {
        Ok(_) => panic!("config was accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn valid_config_loads_with_defaults() {
    let c = parse(&valid()).unwrap();
    assert_eq!(c.paths.len(), 3);
    assert_eq!(c.interface.name, "mptun0");
    assert_eq!(c.interface.table, Table::Auto);
    assert_eq!(c.interface.mtu, None, "derived from the paths at start");
    assert_eq!(c.interface.txqueuelen, 1000);
    assert_eq!(c.peer.persistent_keepalive, Some(10));
    assert_eq!(
        c.paths[1].endpoint,
        Some("198.51.100.2:51821".parse().unwrap())
    );
    assert!(c.paths.iter().all(|p| p.weight.is_none()));
    assert_eq!(c.interface.scheduler, Scheduler::Adaptive);
}

#[test]
fn bad_endpoint_names_path_and_key() {
    let text = valid().replace("198.51.100.2:51822", "10.0.0.1");
    assert_eq!(
        error_of(&text),
        "site-a.toml: path[2].endpoint: invalid socket address \"10.0.0.1\": missing :port"
    );
}

#[test]
fn each_bad_value_names_its_key() {
    let cases = [
        (valid().replace(KEY_B, "nope"), "peer.public-key"),
        (
            valid().replace(&format!("private-key = \"{KEY_A}\""), ""),
            "interface",
        ),
        (
            valid().replace("10.77.0.1/24", "10.77.0.1/40"),
            "interface.address[0]",
        ),
        (
            valid().replace("\"192.168.20.0/24\"", "\"192.168.20/24\""),
            "peer.allowed-ips[1]",
        ),
        (
            valid().replace("listen-port = 51821", "listen-port = 51820"),
            "path[1].listen-port",
        ),
        (
            valid().replace("[interface]", "[interface]\nmtu = 100"),
            "interface.mtu",
        ),
        (
            // One datagram cannot carry it: boringtun would panic sealing.
            valid().replace("[interface]", "[interface]\nmtu = 65535"),
            "interface.mtu",
        ),
        (
            valid().replace("[interface]", "[interface]\ntxqueuelen = 0"),
            "interface.txqueuelen",
        ),
        (
            valid().replace("[interface]", "[interface]\ntable = \"main\""),
            "interface.table",
        ),
        (
            valid().replace("[interface]", "[interface]\nname = \"much-too-long-name0\""),
            "interface.name",
        ),
        (
            valid().replace("[interface]", "[interface]\nreorder-hold-ms = 0"),
            "interface.reorder-hold-ms",
        ),
        (
            valid().replace(
                "[interface]",
                "[interface]\nlow-latency-dscp = [46, \"af52\"]",
            ),
            "interface.low-latency-dscp[1]",
        ),
        (
            valid().replace("listen-port = 51822", "listen-port = 51822\nweight = 0"),
            "path[2].weight",
        ),
        (
            valid().replace("listen-port = 51822", "listen-port = 51822\nbind = \"::1\""),
            "path[2].bind",
        ),
        (
            valid().replace("192.168.20.0/24", "198.51.100.0/24"),
            "peer.allowed-ips",
        ),
    ];
    for (text, key) in cases {
        let message = error_of(&text);
        assert!(
            message.starts_with(&format!("site-a.toml: {key}: ")),
            "expected an error naming {key}, got: {message}"
        );
    }
}

#[test]
fn unknown_keys_are_rejected_with_their_name() {
    let message = error_of(&valid().replace("persistent-keepalive", "persistent-keepalives"));
    assert!(message.starts_with("site-a.toml: "), "{message}");
    assert!(message.contains("persistent-keepalives"), "{message}");
}

#[test]
fn path_count_is_bounded() {
    let no_paths = valid().split("[[path]]").next().unwrap().to_string();
    assert!(error_of(&no_paths).starts_with("site-a.toml: path: need 1 to 16"));
    let mut many = no_paths.clone();
    for port in 0..17 {
        many.push_str(&format!("[[path]]\nlisten-port = {}\n", 40000 + port));
    }
    assert!(error_of(&many).starts_with("site-a.toml: path: need 1 to 16"));
}

#[test]
fn responder_path_needs_a_fixed_port() {
    let text = valid().replace("listen-port = 51822\nendpoint = \"198.51.100.2:51822\"", "");
    assert!(error_of(&text).starts_with("site-a.toml: path[2].listen-port: "));
}

#[test]
fn missing_key_file_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let text = valid().replace(
        &format!("private-key = \"{KEY_A}\""),
        "private-key-file = \"a.key\"",
    );
    let message = Config::parse(&text, "site-a.toml", dir.path())
        .unwrap_err()
        .to_string();
    let key_path = dir.path().join("a.key");
    assert!(
        message.starts_with(&format!(
            "site-a.toml: interface.private-key-file: cannot read {}",
            key_path.display()
        )),
        "{message}"
    );
}

#[test]
fn key_file_is_read_relative_to_the_config_and_loose_modes_warned() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let key_path = dir.path().join("a.key");
    std::fs::write(&key_path, format!("{KEY_A}\n")).unwrap();
    std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let text = valid().replace(
        &format!("private-key = \"{KEY_A}\""),
        "private-key-file = \"a.key\"",
    );
    let (config, warnings) = Config::parse(&text, "site-a.toml", dir.path()).unwrap();
    assert_eq!(
        config.interface.private_key.bytes(),
        &decode_key(KEY_A).unwrap()
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("readable by group or others")),
        "{warnings:?}"
    );

    std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (_, warnings) = Config::parse(&text, "site-a.toml", dir.path()).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[test]
fn an_inline_key_asks_as_private_a_file_as_a_key_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("site-a.toml");
    std::fs::write(&path, valid()).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (config, warnings) = Config::load(&path).unwrap();
    assert!(config.secrets_inline);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("holds a key and is readable")),
        "{warnings:?}"
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (_, warnings) = Config::load(&path).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[test]
fn secrets_do_not_show_in_debug_output() {
    let (config, _) = Config::parse(&valid(), "site-a.toml", Path::new("")).unwrap();
    let shown = format!("{config:?}");
    let key = decode_key(KEY_A).unwrap();
    assert!(!shown.contains(KEY_A), "{shown}");
    assert!(!shown.contains(&format!("{:?}", key)), "{shown}");
    assert!(shown.contains("Secret(..)"), "{shown}");
}

#[test]
fn a_parse_error_names_the_place_and_never_shows_the_line() {
    let secret = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=";
    let broken = valid().replace(
        "[interface]",
        &format!("[interface]\nprivate-key = \"{secret}"),
    );
    let message = error_of(&broken);
    assert!(message.starts_with("site-a.toml: line "), "{message}");
    assert!(!message.contains(secret), "{message}");
}

#[test]
fn a_wg_quick_file_is_pointed_at_import() {
    let secret = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=";
    let text = format!("[Interface]\nPrivateKey = {secret}\n\n[Peer]\nPublicKey = {secret}\n");
    let message = error_of(&text);
    assert!(message.contains("try `mptun import`"), "{message}");
    assert!(!message.contains(secret), "{message}");
}

#[test]
fn networks_are_parsed_as_wg_quick_takes_them() {
    let with = |nets: &str| valid().replace("\"10.77.0.0/24\", \"192.168.20.0/24\"", nets);
    let c = parse(&with("\"10.77.0.9/24\", \"192.0.2.7\", \"fd00:77::1/64\"")).unwrap();
    let shown: Vec<String> = c.peer.allowed_ips.iter().map(|n| n.to_string()).collect();
    assert_eq!(shown, ["10.77.0.0/24", "192.0.2.7/32", "fd00:77::/64"]);
    assert!(c.peer.allows("10.77.0.200".parse().unwrap()));
    assert!(c.peer.allows("::ffff:10.77.0.9".parse().unwrap()));
    assert!(!c.peer.allows("10.77.1.1".parse().unwrap()));
    assert!(c.peer.allows("fd00:77::abcd".parse().unwrap()));
    for bad in ["\"10.0.0.1/33\"", "\"10.0.0/24\"", "\"fd00::/129\""] {
        assert!(
            error_of(&with(bad)).contains("peer.allowed-ips[0]"),
            "{bad}"
        );
    }
}

#[test]
fn tables_are_auto_off_or_a_number() {
    let with = |table: &str| valid().replace("[peer]", &format!("table = {table}\n[peer]"));
    assert_eq!(parse(&with("\"off\"")).unwrap().interface.table, Table::Off);
    assert_eq!(
        parse(&with("1234")).unwrap().interface.table,
        Table::Number(1234)
    );
    for bad in ["0", "-1", "\"main\"", "4294967296"] {
        assert!(error_of(&with(bad)).contains("interface.table"), "{bad}");
    }
    assert!(error_of(&valid().replace("[peer]", "fwmark = 0\n[peer]")).contains("interface.fwmark"));
}

#[test]
fn a_default_route_is_marked_out_of_the_tunnel_not_refused() {
    let all = valid().replace(
        "\"10.77.0.0/24\", \"192.168.20.0/24\"",
        "\"0.0.0.0/0\", \"::/0\"",
    );
    let c = parse(&all).unwrap();
    assert_eq!(c.interface.fwmark, Some(DEFAULT_FWMARK));
    let c = parse(&all.replace("[peer]", "fwmark = 77\n[peer]")).unwrap();
    assert_eq!(c.interface.fwmark, Some(77));
    let c = parse(&all.replace("[peer]", "table = 1234\n[peer]")).unwrap();
    assert_eq!(
        c.interface.fwmark, None,
        "a numbered table is the operator's to route"
    );
    assert_eq!(parse(&valid()).unwrap().interface.fwmark, None);
    // A narrower network holding an endpoint still loops.
    let narrow = valid().replace("192.168.20.0/24", "198.51.100.0/24");
    assert!(error_of(&narrow).contains("would loop"));
    // Policy rules outlive a daemon that dropped root.
    let nobody = all.replace("[peer]", "user = \"nobody\"\n[peer]");
    assert!(error_of(&nobody).contains("interface.user: a default route"));
}

#[test]
fn a_name_that_does_not_resolve_yet_waits_in_the_background() {
    let text = valid().replace("198.51.100.2:51821", "gw.example.net:51821");
    let (c, warnings) = Config::parse_with(&text, "site-a.toml", Path::new("/x"), &|_| {
        Err("cannot resolve \"gw.example.net:51821\": no network".into())
    })
    .unwrap();
    assert_eq!(c.paths[1].endpoint, None);
    assert_eq!(
        c.paths[1].endpoint_name.as_deref(),
        Some("gw.example.net:51821")
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("path[1].endpoint") && w.contains("background")),
        "{warnings:?}"
    );
    // A malformed one is still an error.
    let bad = valid().replace("198.51.100.2:51821", "gw.example.net:port");
    assert!(error_of(&bad).contains("path[1].endpoint"));
}

#[test]
fn low_latency_dscp_takes_numbers_and_class_names() {
    let c = parse(&valid()).unwrap();
    assert_eq!(c.interface.low_latency_dscp, DscpSet::LOW_LATENCY);
    let text = valid().replace(
        "[interface]",
        "[interface]\nlow-latency-dscp = [\"EF\", \"af21\", \"cs6\", \"af43\", 0, 63]",
    );
    let set = parse(&text).unwrap().interface.low_latency_dscp;
    assert_eq!(set, DscpSet::of(&[46, 18, 48, 38, 0, 63]));
    let none = valid().replace("[interface]", "[interface]\nlow-latency-dscp = []");
    assert_eq!(
        parse(&none).unwrap().interface.low_latency_dscp,
        DscpSet::default()
    );
    for bad in [
        "64", "-1", "\"cs8\"", "\"af14\"", "\"af01\"", "\"x\"", "true",
    ] {
        let text = valid().replace(
            "[interface]",
            &format!("[interface]\nlow-latency-dscp = [{bad}]"),
        );
        let e = error_of(&text);
        assert!(
            e.starts_with("site-a.toml: interface.low-latency-dscp[0]: "),
            "{e}"
        );
    }
}
