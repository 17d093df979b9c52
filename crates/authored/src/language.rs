//! The languages an authored tool may be written in. Below both the definition (which names one)
//! and the dependency specs (which each language reads in its own way).

use serde::{Deserialize, Serialize};

/// The language a tool's code is written in, and so the interpreter that runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    Python,
    Node,
    Sh,
}

impl Language {
    pub const ALL: [Language; 3] = [Language::Python, Language::Node, Language::Sh];

    pub fn as_str(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::Node => "node",
            Language::Sh => "sh",
        }
    }

    /// The file the code is written to inside the sandbox.
    pub fn script_name(self) -> &'static str {
        match self {
            Language::Python => "tool.py",
            // `.js` with no package.json: Node takes `import` and `require` alike.
            Language::Node => "tool.js",
            Language::Sh => "tool.sh",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Language> {
        Language::ALL.into_iter().find(|l| l.as_str() == text)
    }
}
