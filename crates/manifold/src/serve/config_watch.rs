//! Notices that the configuration file changed, so `serve` can reload it without a signal.
//!
//! A poll of the file's bytes every [`POLL`] rather than filesystem notifications: it needs no
//! dependency, sees an editor's write-then-rename and a ConfigMap's symlink swap alike (the path
//! is read afresh each time), and costs one small read a second. A change counts once the file
//! has read the same at two polls in a row (debounce: an editor that writes in several steps
//! triggers one reload, of the finished file), and only if its bytes differ from the ones last
//! loaded, so touching the file does nothing. Files named by `${file:...}` are not watched;
//! SIGHUP reloads those.

use std::path::PathBuf;
use std::time::Duration;

/// How often the file is read.
pub const POLL: Duration = Duration::from_secs(1);

/// The file's bytes, or `None` when it cannot be read (being replaced, or deleted).
type Content = Option<Vec<u8>>;

pub struct ConfigWatch {
    path: PathBuf,
    /// What the last reload (or the start) read.
    loaded: Content,
    /// What the last poll read.
    last_poll: Content,
    ticks: tokio::time::Interval,
}

async fn read(path: &PathBuf) -> Content {
    tokio::fs::read(path).await.ok()
}

impl ConfigWatch {
    /// Watches `path` every `poll` ([`POLL`] in `serve`), taking its current bytes as the ones
    /// loaded.
    pub async fn new(path: PathBuf, poll: Duration) -> ConfigWatch {
        let loaded = read(&path).await;
        let mut ticks = tokio::time::interval(poll);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ConfigWatch {
            last_poll: loaded.clone(),
            loaded,
            path,
            ticks,
        }
    }

    /// Records the file as loaded now (after a reload for any reason).
    pub async fn mark_loaded(&mut self) {
        self.loaded = read(&self.path).await;
        self.last_poll = self.loaded.clone();
    }

    /// Resolves when the file changed and settled; the caller reloads and calls `mark_loaded`.
    pub async fn changed(&mut self) {
        loop {
            self.ticks.tick().await;
            let now = read(&self.path).await;
            let settled = now == self.last_poll;
            self.last_poll = now;
            if settled && self.last_poll != self.loaded {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST_POLL: Duration = Duration::from_millis(20);

    #[tokio::test]
    async fn a_change_is_reported_once_it_settles_and_touching_is_not_a_change() {
        let dir = std::env::temp_dir().join(format!("manifold-watch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("manifold.toml");
        std::fs::write(&path, "a").unwrap();
        let mut watch = ConfigWatch::new(path.clone(), TEST_POLL).await;
        // Rewriting the same bytes is no change: nothing within a few polls.
        std::fs::write(&path, "a").unwrap();
        let quiet = tokio::time::timeout(TEST_POLL * 10, watch.changed()).await;
        assert!(quiet.is_err(), "same bytes reported as a change");
        std::fs::write(&path, "b").unwrap();
        // A hang guard only: the change is seen within two polls.
        tokio::time::timeout(Duration::from_secs(20), watch.changed())
            .await
            .expect("a change of the bytes is reported");
        watch.mark_loaded().await;
        let quiet = tokio::time::timeout(TEST_POLL * 10, watch.changed()).await;
        assert!(quiet.is_err(), "a loaded change is reported once");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
