//! Asking a person before a risky call: the stage between authorization and forwarding that holds
//! a call a rule marks `effect = "ask"`, puts the question through the best channel the call has,
//! and lets it run only on an explicit yes, for exactly the arguments shown.

pub mod ledger;
pub mod seal;
pub mod stage;

pub use stage::{
    APPROVAL_META, APPROVAL_REQUIRED, ApprovalAnnouncer, Approvals, Granted, HeldCall, Verdict,
};
