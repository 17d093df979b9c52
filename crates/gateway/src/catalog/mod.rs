//! The merged catalog: every upstream's tools, resources, templates and prompts under exposed names.

pub mod build;
pub mod hygiene;
pub mod naming;
pub mod overrides;
pub mod suggest;
pub mod uri;
pub mod uri_normal;
