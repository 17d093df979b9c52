//! The built-in tools' names, reserved so that no upstream or authored tool can take one. Kept
//! apart from the tools themselves (`builtin.rs`), which read the gateway, so that the rules and
//! the catalog can name them without depending on the gateway.

pub const HEALTH: &str = "manifold_health";
pub const SEARCH: &str = "manifold_search_tools";
pub const CALL: &str = "manifold_call_tool";
pub const INSTRUCTIONS: &str = "manifold_instructions";
pub const CREATE_TOOL: &str = "manifold_create_tool";
pub const UPDATE_TOOL: &str = "manifold_update_tool";
pub const DISABLE_TOOL: &str = "manifold_disable_tool";
pub const ENABLE_TOOL: &str = "manifold_enable_tool";
pub const DELETE_TOOL: &str = "manifold_delete_tool";
pub const TOOL_HISTORY: &str = "manifold_tool_history";
pub const ROLLBACK_TOOL: &str = "manifold_rollback_tool";
/// The authoring tools (`hosted.rs`): defined and run by the hosted-tools provider, listed only
/// when there is one, judged as built-ins.
pub const AUTHORING: &[&str] = &[
    INSTRUCTIONS,
    CREATE_TOOL,
    UPDATE_TOOL,
    DISABLE_TOOL,
    ENABLE_TOOL,
    DELETE_TOOL,
    TOOL_HISTORY,
    ROLLBACK_TOOL,
];
/// The authoring tools that make or change code that will run: what an ask rule may hold.
pub const AUTHORING_CHANGES: &[&str] = &[CREATE_TOOL, UPDATE_TOOL, ROLLBACK_TOOL];
/// Manifold's own tools, always listed.
pub const CORE: &[&str] = &[HEALTH, SEARCH, CALL];
/// Every reserved name, the core tools and the authoring ones: no server tool and no authored
/// tool may take one.
pub const NAMES: &[&str] = &concat_names::<{ CORE.len() + AUTHORING.len() }>(CORE, AUTHORING);

/// Two name lists as one, at compile time.
const fn concat_names<const N: usize>(a: &[&'static str], b: &[&'static str]) -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < a.len() {
        out[i] = a[i];
        i += 1;
    }
    let mut j = 0;
    while j < b.len() {
        out[a.len() + j] = b[j];
        j += 1;
    }
    out
}
