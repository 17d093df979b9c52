//! manifold-authored: tools that users and agents author at run time. A definition (name,
//! schemas, annotations, code in python, node or sh, pinned dependencies, timeout) is checked
//! field by field, stored as a new version in Manifold's store, offered to every client through
//! the gateway's hosted-tools seam, and each call runs in the sandbox with no network.

pub mod definition;
pub mod dependencies;
pub mod instructions;
pub mod language;
pub mod provider;
pub mod registry;
pub mod result;
pub mod runner;

pub use definition::{Invalid, ToolDefinition};
pub use language::Language;
pub use provider::AuthoredTools;
pub use registry::{Current, Registry, RegistryError};
pub use runner::{RunError, Runner};
