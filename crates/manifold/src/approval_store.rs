//! Approvals in Manifold's store: the binary backs manifold-gateway's `ApprovalLedger` with
//! manifold-store's `approvals` table, so the gateway crate needs no database driver and a
//! question asked by one gateway can be answered by `manifold approvals` (another process) or seen
//! by another replica. Every change of state stays conditional on the state the writer saw, as in
//! the gateway's `MemoryLedger`.

use std::sync::Arc;

use manifold_gateway::approval::ledger::{
    ApprovalLedger, LedgerEntry, LedgerError, LedgerFuture, MAX_LEDGER_ARGUMENTS_BYTES, Transition,
};
use manifold_store::{ApprovalRecord, MAX_APPROVAL_PAGE, Store, StoreError};

// The gateway keeps arguments beside a row up to its bound; the store takes exactly as much.
const _: () = assert!(MAX_LEDGER_ARGUMENTS_BYTES == manifold_store::MAX_LEDGER_ARGUMENTS_BYTES);

/// The store's `approvals`, as manifold-gateway sees it.
pub struct StoreApprovals {
    store: Arc<Store>,
}

impl StoreApprovals {
    pub fn new(store: Arc<Store>) -> StoreApprovals {
        StoreApprovals { store }
    }

    fn failed(&self, e: &StoreError) -> LedgerError {
        LedgerError::Failed {
            location: self.describe(),
            reason: e.to_string(),
        }
    }
}

/// The gateway's entry as the store keeps it (arguments past the bound: digest only, as the
/// entry's contract says).
pub fn record(e: &LedgerEntry) -> ApprovalRecord {
    ApprovalRecord {
        id: e.id.clone(),
        state: e.state.clone(),
        caller: e.caller.clone(),
        server: e.server.clone(),
        tool: e.tool.clone(),
        arguments_sha256: e.arguments_sha256.clone(),
        definition_sha256: e.definition_sha256.clone(),
        arguments_json: e
            .arguments_json
            .clone()
            .filter(|a| a.len() <= MAX_LEDGER_ARGUMENTS_BYTES),
        approvers: e.approvers.clone(),
        channel: e.channel.clone(),
        rule: e.rule.clone(),
        holder: e.holder.clone(),
        created_at_ms: e.created_at_ms,
        expires_at_ms: e.expires_at_ms,
        answered_by: e.answered_by.clone(),
        answered_at_ms: e.answered_at_ms,
        note: e.note.clone(),
    }
}

/// A stored row as the gateway's entry.
pub fn entry(r: ApprovalRecord) -> LedgerEntry {
    LedgerEntry {
        id: r.id,
        state: r.state,
        caller: r.caller,
        server: r.server,
        tool: r.tool,
        arguments_sha256: r.arguments_sha256,
        definition_sha256: r.definition_sha256,
        arguments_json: r.arguments_json,
        approvers: r.approvers,
        channel: r.channel,
        rule: r.rule,
        holder: r.holder,
        created_at_ms: r.created_at_ms,
        expires_at_ms: r.expires_at_ms,
        answered_by: r.answered_by,
        answered_at_ms: r.answered_at_ms,
        note: r.note,
    }
}

impl ApprovalLedger for StoreApprovals {
    fn insert<'a>(&'a self, entry: &'a LedgerEntry) -> LedgerFuture<'a, ()> {
        Box::pin(async move {
            self.store
                .approvals()
                .insert(&record(entry))
                .await
                .map_err(|e| self.failed(&e))
        })
    }

    fn get<'a>(&'a self, id: &'a str) -> LedgerFuture<'a, Option<LedgerEntry>> {
        Box::pin(async move {
            self.store
                .approvals()
                .get(id)
                .await
                .map(|r| r.map(entry))
                .map_err(|e| self.failed(&e))
        })
    }

    fn transition<'a>(&'a self, change: Transition<'a>) -> LedgerFuture<'a, bool> {
        Box::pin(async move {
            self.store
                .approvals()
                .transition(
                    change.id,
                    change.from,
                    change.to,
                    change.by,
                    change.at_ms,
                    change.note,
                )
                .await
                .map_err(|e| self.failed(&e))
        })
    }

    fn list(&self, pending_only: bool, limit: usize) -> LedgerFuture<'_, Vec<LedgerEntry>> {
        Box::pin(async move {
            self.store
                .approvals()
                .list(pending_only, limit.min(MAX_APPROVAL_PAGE))
                .await
                .map(|rows| rows.into_iter().map(entry).collect())
                .map_err(|e| self.failed(&e))
        })
    }

    fn abandon_held_by<'a>(&'a self, holder: &'a str, at_ms: i64) -> LedgerFuture<'a, u64> {
        Box::pin(async move {
            self.store
                .approvals()
                .abandon_held_by(holder, at_ms)
                .await
                .map_err(|e| self.failed(&e))
        })
    }

    fn describe(&self) -> String {
        format!("the store ({})", self.store.location().shown())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use manifold_gateway::approval::ledger::{APPROVED, MemoryLedger, PENDING, REJECTED};
    use manifold_store::StoreLocation;

    fn sample(id: &str, created_at_ms: i64) -> LedgerEntry {
        LedgerEntry {
            id: id.to_owned(),
            state: PENDING.to_owned(),
            caller: Some("alice".to_owned()),
            server: "fs".to_owned(),
            tool: "delete_file".to_owned(),
            arguments_sha256: "a".repeat(64),
            definition_sha256: "d".repeat(64),
            arguments_json: Some("{\"path\":\"/tmp/x\"}".to_owned()),
            approvers: vec!["caller".to_owned(), "group:ops".to_owned()],
            channel: "out_of_band".to_owned(),
            rule: "rules[0]".to_owned(),
            holder: "host:1".to_owned(),
            created_at_ms,
            expires_at_ms: created_at_ms + 60_000,
            answered_by: None,
            answered_at_ms: None,
            note: None,
        }
    }

    /// The same calls on the store and on the gateway's in-memory ledger give the same rows.
    #[tokio::test]
    async fn the_store_ledger_behaves_like_the_memory_ledger() {
        let dir =
            std::env::temp_dir().join(format!("manifold-approval-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Arc::new(Store::open(&StoreLocation::sqlite(&dir)).await.unwrap());
        let stored = StoreApprovals::new(Arc::clone(&store));
        let memory = MemoryLedger::default();
        let ledgers: [&dyn ApprovalLedger; 2] = [&stored, &memory];
        for ledger in ledgers {
            ledger.insert(&sample("apr_1", 10)).await.unwrap();
            ledger.insert(&sample("apr_2", 20)).await.unwrap();
            let approve = Transition {
                id: "apr_1",
                from: PENDING,
                to: APPROVED,
                by: Some("bob"),
                at_ms: 30,
                note: None,
            };
            assert!(ledger.transition(approve).await.unwrap());
            assert!(!ledger.transition(approve).await.unwrap());
            let deny = Transition {
                to: REJECTED,
                ..approve
            };
            assert!(!ledger.transition(deny).await.unwrap());
            assert_eq!(ledger.abandon_held_by("host:1", 40).await.unwrap(), 1);
        }
        assert_eq!(
            stored.list(false, usize::MAX).await.unwrap(),
            memory.list(false, usize::MAX).await.unwrap()
        );
        assert_eq!(
            stored.get("apr_1").await.unwrap(),
            memory.get("apr_1").await.unwrap()
        );
        assert!(stored.list(true, 10).await.unwrap().is_empty());
        assert!(
            stored.describe().contains("store.sqlite"),
            "{}",
            stored.describe()
        );
        drop(stored);
        if let Ok(store) = Arc::try_unwrap(store) {
            store.close().await;
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn arguments_past_the_bound_are_kept_as_digest_only() {
        let big = LedgerEntry {
            arguments_json: Some("x".repeat(MAX_LEDGER_ARGUMENTS_BYTES + 1)),
            ..sample("apr_big", 1)
        };
        assert_eq!(record(&big).arguments_json, None);
        let fits = sample("apr_fits", 1);
        assert_eq!(entry(record(&fits)), fits);
    }
}
