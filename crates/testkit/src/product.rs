//! Which of the workspace's crates are Manifold itself, for the checks that read the product's
//! sources as text (`tests/import_loops.rs`, `tests/task_locals.rs`).

/// Crates whose sources are Manifold itself (test peers, fixtures and the benchmark are not).
pub const PRODUCT_CRATES: [&str; 14] = [
    "audit",
    "auth",
    "authored",
    "config",
    "egress",
    "gateway",
    "manifold",
    "sandbox",
    "server",
    "store",
    "suggest",
    "telemetry",
    "upstream",
    "wire",
];
