//! Secret args' keys (sealing bound to the request and arg, rotation) and sources.

use base64::Engine as _;

use super::*;

fn key_file(dir: &std::path::Path, name: &str, byte: u8) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        base64::engine::general_purpose::STANDARD.encode([byte; 32]),
    )
    .unwrap();
    path
}

fn key(id: &str, file: PathBuf) -> KeyConfig {
    KeyConfig {
        id: id.to_owned(),
        file: Some(file),
        env: None,
    }
}

#[test]
fn a_sealed_value_opens_only_for_its_request_and_arg_and_after_a_rotation() {
    let dir = tempfile::tempdir().unwrap();
    let old = SecretArgs::load(&SecretsConfig {
        keys: vec![key("k1", key_file(dir.path(), "k1", 1))],
        ..SecretsConfig::default()
    })
    .unwrap();
    let sealed = old.seal("r1", "password", "hunter2").unwrap();
    assert!(sealed.starts_with("v1:k1:"), "{sealed}");
    assert!(!sealed.contains("hunter2"));
    assert_ne!(
        sealed,
        old.seal("r1", "password", "hunter2").unwrap(),
        "a nonce each time"
    );
    assert_eq!(old.open("r1", "password", &sealed).unwrap(), "hunter2");
    let other = old.open("r2", "password", &sealed).unwrap_err().to_string();
    assert!(other.contains("does not open with key \"k1\""), "{other}");
    assert!(old.open("r1", "token", &sealed).is_err());
    // Rotated: a new key first seals; the old one still opens what it sealed.
    let rotated = SecretArgs::load(&SecretsConfig {
        keys: vec![
            key("k2", key_file(dir.path(), "k2", 2)),
            key("k1", key_file(dir.path(), "k1", 1)),
        ],
        ..SecretsConfig::default()
    })
    .unwrap();
    assert_eq!(rotated.open("r1", "password", &sealed).unwrap(), "hunter2");
    assert!(
        rotated
            .seal("r1", "password", "x")
            .unwrap()
            .starts_with("v1:k2:")
    );
    // Dropped too soon: said so.
    let dropped = SecretArgs::load(&SecretsConfig {
        keys: vec![key("k2", key_file(dir.path(), "k2", 2))],
        ..SecretsConfig::default()
    })
    .unwrap();
    let err = dropped
        .open("r1", "password", &sealed)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("sealed with key \"k1\", which secrets.keys no longer has"),
        "{err}"
    );
    assert!(!format!("{rotated:?}").contains("AAAA"));
}

#[tokio::test]
async fn sources_are_read_on_the_request_manager_for_the_types_they_allow() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "from-a-file\n").unwrap();
    let sources = [
        (
            "file".to_owned(),
            SourceConfig {
                file: Some(file),
                ..SourceConfig::default()
            },
        ),
        (
            "command".to_owned(),
            SourceConfig {
                command: Some(vec!["printf".to_owned(), "from a command\\n".to_owned()]),
                requests: vec!["deploy".to_owned()],
                ..SourceConfig::default()
            },
        ),
        (
            "failing".to_owned(),
            SourceConfig {
                command: Some(vec![
                    "sh".to_owned(),
                    "-c".to_owned(),
                    "echo s3cret >&2; exit 3".to_owned(),
                ]),
                ..SourceConfig::default()
            },
        ),
    ];
    let secrets = SecretArgs::load(&SecretsConfig {
        keys: Vec::new(),
        sources: sources.into_iter().collect(),
    })
    .unwrap();
    assert_eq!(secrets.resolve("file", "any").await.unwrap(), "from-a-file");
    assert_eq!(
        secrets.resolve("command", "deploy").await.unwrap(),
        "from a command"
    );
    let err = secrets
        .resolve("command", "restart")
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "secret source \"command\" is not for requests of type restart"
    );
    let err = secrets
        .resolve("failing", "any")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`sh` failed") && !err.contains("s3cret"),
        "{err}"
    );
    let err = secrets
        .resolve("vault", "any")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "expected one of the Request Manager's secrets.sources: command, failing, file"
        ),
        "{err}"
    );
    let bad = SecretArgs::load(&SecretsConfig {
        sources: [(
            "two".to_owned(),
            SourceConfig {
                env: Some("A".to_owned()),
                file: Some("/x".into()),
                ..SourceConfig::default()
            },
        )]
        .into_iter()
        .collect(),
        ..SecretsConfig::default()
    })
    .unwrap_err()
    .to_string();
    assert!(
        bad.contains("expected exactly one of `env:`, `file:` and `command:`"),
        "{bad}"
    );
}
