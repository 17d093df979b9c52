//! The manifold binary.
fn main() {}
