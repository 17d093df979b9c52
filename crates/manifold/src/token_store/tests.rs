//! The unit tests of `token_store.rs`, kept beside it so the file reads as the code it tests.

#![allow(clippy::unwrap_used)]
use super::*;
use manifold_store::StoreLocation;
use manifold_upstream::auth::registration::{ClientAuthMethod, ClientOrigin, ClientRegistration};
use manifold_upstream::auth::token::TokenSet;

fn credentials(token: &str) -> StoredCredentials {
    StoredCredentials {
        version: STORE_VERSION,
        resource: "https://mcp.example/mcp".to_owned(),
        issuer: "https://as.example".to_owned(),
        token_endpoint: "https://as.example/token".to_owned(),
        client: ClientRegistration {
            issuer: "https://as.example".to_owned(),
            client_id: "c".to_owned(),
            client_secret: None,
            auth_method: ClientAuthMethod::None,
            origin: ClientOrigin::Registered,
            redirect_uris: vec!["http://127.0.0.1:1/callback".to_owned()],
        },
        tokens: TokenSet {
            access_token: token.to_owned(),
            refresh_token: Some("rt".to_owned()),
            expires_at: Some(42),
            scope: None,
            requested_scope: None,
        },
    }
}

fn config(data_dir: &Path, extra: &str) -> Config {
    let text = format!(
        "[gateway]\ndata_dir = {}\n{extra}",
        serde_json::to_string(&data_dir.display().to_string()).unwrap()
    );
    Config::from_str(&text, "test.toml").unwrap()
}

async fn store_in(data_dir: &Path) -> Arc<Store> {
    Arc::new(Store::open(&StoreLocation::sqlite(data_dir)).await.unwrap())
}

#[tokio::test]
async fn tokens_round_trip_and_the_key_file_is_made_only_to_write() {
    let dir = tempfile_dir("round-trip");
    let store = store_in(&dir).await;
    let tokens = StoreTokens::new(Arc::clone(&store), &config(&dir, "")).unwrap();
    assert_eq!(tokens.load("srv").await.unwrap(), None);
    assert!(!token_key_file(&dir).exists(), "reading made a key");
    tokens.save("srv", &credentials("at-1")).await.unwrap();
    assert!(token_key_file(&dir).exists());
    assert_eq!(tokens.load("srv").await.unwrap(), Some(credentials("at-1")));
    assert!(tokens.describe("srv").contains("store.key"));

    // The key file lost: the rows are reported, not replaced by a new key's garbage.
    std::fs::remove_file(token_key_file(&dir)).unwrap();
    let fresh = StoreTokens::new(Arc::clone(&store), &config(&dir, "")).unwrap();
    let lost = fresh.load("srv").await.unwrap_err().to_string();
    assert!(
        lost.contains("cannot be decrypted with the key from")
            && lost.contains("store.key, which does not exist")
            && lost.contains("run `manifold login srv` again"),
        "{lost}"
    );
    assert!(!token_key_file(&dir).exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_configured_key_is_used_and_another_key_is_refused_by_name() {
    let dir = tempfile_dir("configured");
    let store = store_in(&dir).await;
    let key_file = dir.join("token.key");
    std::fs::write(&key_file, format!("{}\n", "cd".repeat(32))).unwrap();
    let with_file = format!(
        "[store]\ntoken_key = {}\n",
        serde_json::to_string(&format!("file:{}", key_file.display())).unwrap()
    );
    let tokens = StoreTokens::new(Arc::clone(&store), &config(&dir, &with_file)).unwrap();
    tokens.save("srv", &credentials("at-2")).await.unwrap();
    assert!(
        !token_key_file(&dir).exists(),
        "a configured key makes no key file"
    );
    assert_eq!(tokens.load("srv").await.unwrap(), Some(credentials("at-2")));
    // Without the configured key, the data dir's (new) key cannot open the row.
    let other = StoreTokens::new(Arc::clone(&store), &config(&dir, "")).unwrap();
    other.save("other", &credentials("at-3")).await.unwrap();
    let wrong = other.load("srv").await.unwrap_err().to_string();
    assert!(
        wrong.contains(&format!(
            "cannot be decrypted with the key from {}",
            token_key_file(&dir).display()
        )),
        "{wrong}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn old_token_files_are_imported_once_and_the_directory_renamed() {
    let dir = tempfile_dir("import");
    let store = store_in(&dir).await;
    let tokens = StoreTokens::new(Arc::clone(&store), &config(&dir, "")).unwrap();
    let files = FileTokenStore::new(old_token_dir(&dir));
    files
        .save("fresh", &credentials("from-file"))
        .await
        .unwrap();
    files.save("kept", &credentials("older")).await.unwrap();
    std::fs::write(files.path("junk"), "not json").unwrap();
    tokens.save("kept", &credentials("newer")).await.unwrap();

    let report = import_token_files(&dir, &tokens).await.unwrap().unwrap();
    assert_eq!(report.imported, ["fresh"]);
    assert_eq!(report.already_present, ["kept"]);
    assert_eq!(report.unreadable, ["junk"]);
    assert_eq!(report.renamed_to, dir.join("oauth.imported"));
    assert!(!old_token_dir(&dir).exists());
    assert!(dir.join("oauth.imported/fresh.json").exists());
    assert_eq!(
        tokens.load("fresh").await.unwrap(),
        Some(credentials("from-file"))
    );
    assert_eq!(
        tokens.load("kept").await.unwrap(),
        Some(credentials("newer")),
        "an import never replaces what the store has"
    );
    let line = describe_import(&report);
    assert!(
        line.contains("Imported the OAuth tokens of 1 server(s)")
            && line.contains("1 already there (kept)")
            && line.contains("1 unreadable and not imported (junk")
            && line.contains("oauth.imported."),
        "{line}"
    );

    // A second run imports nothing; a directory an older Manifold made again gets a new name.
    assert_eq!(import_token_files(&dir, &tokens).await.unwrap(), None);
    files.save("again", &credentials("x")).await.unwrap();
    let second = import_token_files(&dir, &tokens).await.unwrap().unwrap();
    assert_eq!(second.imported, ["again"]);
    assert_eq!(second.renamed_to, dir.join("oauth.imported.2"));
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempfile_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "manifold-token-store-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn renaming_gives_up_after_the_numbered_names_and_says_so() {
    let dir = tempfile_dir("names");
    let old = old_token_dir(&dir);
    std::fs::create_dir_all(&old).unwrap();
    std::fs::create_dir_all(dir.join("oauth.imported")).unwrap();
    for n in 2..MAX_IMPORTED_NAMES {
        std::fs::create_dir_all(dir.join(format!("oauth.imported.{n}"))).unwrap();
    }
    let last = retire(&old).unwrap();
    assert_eq!(
        last,
        dir.join(format!("oauth.imported.{MAX_IMPORTED_NAMES}"))
    );
    std::fs::create_dir_all(&old).unwrap();
    let refused = retire(&old).unwrap_err();
    assert!(
        refused.contains("100 numbered names after it are all taken"),
        "{refused}"
    );
    assert!(old.exists(), "nothing was renamed");
    let _ = std::fs::remove_dir_all(&dir);
}
