//! The unit tests of `pin_store.rs`, kept beside it so the file reads as the code it tests.

#![allow(clippy::unwrap_used)]
use std::collections::HashMap;

use super::*;
use manifold_gateway::pins::{MAX_PINNED_DEFINITION_BYTES, PIN_WRITE_BATCH};
use manifold_store::StoreLocation;

fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("manifold-pin-store-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn sample() -> PinFile {
    let mut file = PinFile::default();
    file.pins.entry("s".to_owned()).or_default().insert(
        "echo".to_owned(),
        Pin {
            sha256: "a".repeat(64),
            parts: [("description".to_owned(), "b".repeat(16))].into(),
            pinned_at: 1_700_000_000,
            approved_at: Some(1_700_000_100),
            definition: Some("{\"name\":\"echo\"}".to_owned()),
        },
    );
    file.pins.entry("s".to_owned()).or_default().insert(
        "add".to_owned(),
        Pin {
            sha256: "c".repeat(64),
            parts: Default::default(),
            pinned_at: 1_700_000_000,
            approved_at: None,
            definition: None,
        },
    );
    file.changed.entry("s".to_owned()).or_default().insert(
        "echo".to_owned(),
        Change {
            pinned: "a".repeat(64),
            seen: "d".repeat(64),
            parts: [("description".to_owned(), "e".repeat(16))].into(),
            fields: vec!["description".to_owned()],
            seen_at: 1_700_000_200,
            definition: Some("{\"name\":\"echo\",\"v\":2}".to_owned()),
        },
    );
    file
}

#[test]
fn a_pin_file_survives_the_round_trip_through_store_rows() {
    assert_eq!(pin_file(pin_rows(&sample())), sample());
    assert_eq!(MS_PER_SECOND, 1000);
    // What the gateway hands over in one call, and keeps, fits what the store takes.
    const { assert!(PIN_WRITE_BATCH <= MAX_PIN_BATCH) };
    const { assert!(MAX_PINNED_DEFINITION_BYTES <= MAX_PIN_DEFINITION_BYTES) };
}

#[tokio::test]
async fn the_store_backs_a_running_keeper_and_an_approval_from_another_opening_reaches_it() {
    let dir = scratch("keeper");
    let location = StoreLocation::sqlite(&dir);
    let store = Arc::new(Store::open(&location).await.unwrap());
    let pins = manifold_gateway::pins::Pins::open(
        Arc::new(StorePins::new(Arc::clone(&store))),
        HashMap::new(),
    )
    .await;
    // As `manifold pins approve` would: the command's own opening beside the gateway's.
    let command = Arc::new(Store::open_for_command(&location).await.unwrap());
    let rows = pin_rows(&sample());
    command.pins().import(&rows).await.unwrap();
    assert!(
        pins.sync().await,
        "the keeper takes in the other process's write"
    );
    assert_eq!(pins.server_report("s").changed.len(), 1);
    let approved = StorePins::new(Arc::clone(&command))
        .approve("s", 1_700_000_300)
        .await
        .unwrap();
    assert_eq!(approved, ["echo"]);
    assert!(pins.sync().await);
    let report = pins.server_report("s");
    assert!(report.changed.is_empty());
    assert_eq!(report.pinned, 2);
    let (file, _) = StorePins::new(Arc::clone(&store)).snapshot().await.unwrap();
    let echo = &file.pins["s"]["echo"];
    assert_eq!(echo.sha256, "d".repeat(64));
    assert_eq!(echo.approved_at, Some(1_700_000_300));
    assert_eq!(
        echo.definition.as_deref(),
        Some("{\"name\":\"echo\",\"v\":2}")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn writes_the_store_cannot_key_are_kept_out_and_do_not_block_the_others() {
    let dir = scratch("long-names");
    let store = Arc::new(Store::open(&StoreLocation::sqlite(&dir)).await.unwrap());
    let repository = StorePins::new(Arc::clone(&store));
    let pin = sample().pins["s"]["add"].clone();
    let writes = [
        PinWrite::Pin {
            server: "s".to_owned(),
            tool: "n".repeat(MAX_PIN_NAME_LEN + 1),
            pin: pin.clone(),
        },
        PinWrite::Pin {
            server: "s".to_owned(),
            tool: "ok".to_owned(),
            pin: Pin {
                definition: Some("x".repeat(MAX_PIN_DEFINITION_BYTES + 1)),
                ..pin
            },
        },
    ];
    let before = repository.revision().await.unwrap();
    assert_eq!(repository.apply(&writes).await.unwrap(), before + 1);
    let (file, _) = repository.snapshot().await.unwrap();
    let tools: Vec<&String> = file.pins["s"].keys().collect();
    assert_eq!(tools, ["ok"]);
    assert_eq!(file.pins["s"]["ok"].definition, None, "too large to keep");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn pins_json_is_imported_once_and_renamed() {
    let dir = scratch("import");
    let store = Store::open(&StoreLocation::sqlite(&dir)).await.unwrap();
    let old = OldPinFile::in_dir(&dir);
    std::fs::write(old.path(), serde_json::to_string(&sample()).unwrap()).unwrap();
    // A pin the store has already (a gateway pinned it meanwhile) is kept.
    let kept_row = PinRecord {
        sha256: "f".repeat(64),
        ..pin_rows(&sample()).remove(0)
    };
    store
        .pins()
        .import(std::slice::from_ref(&kept_row))
        .await
        .unwrap();

    let report = import_pin_file(&dir, &store).await.unwrap().unwrap();
    assert_eq!((report.imported, report.already_present), (1, 1));
    assert_eq!(report.servers, ["s"]);
    assert_eq!(report.renamed_to, dir.join("pins.json.imported"));
    assert!(!old.exists());
    let snapshot = store.pins().snapshot().await.unwrap();
    let file = pin_file(snapshot.pins);
    assert_eq!(file.pins["s"]["add"].sha256, kept_row.sha256);
    assert_eq!(file.changed["s"]["echo"], sample().changed["s"]["echo"]);
    let line = describe_import(&report);
    assert!(
        line.starts_with("Imported 1 pinned tool definition(s) from ")
            && line.contains("(servers: s); 1 already there; the old file is now "),
        "{line}"
    );
    assert_eq!(import_pin_file(&dir, &store).await.unwrap(), None);

    // A file that cannot be read is refused, naming it, and left where it is.
    std::fs::write(old.path(), "{not json").unwrap();
    let refused = import_pin_file(&dir, &store).await.unwrap_err();
    assert!(
        refused.message.contains("pins.json is not a pin file"),
        "{}",
        refused.message
    );
    assert!(old.exists());
    store.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}
