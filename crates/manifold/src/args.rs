//! The command line, declared once.
//!
//! Only the binary parses command lines; everything below it takes typed values.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "manifold",
    version,
    about = "Manifold: one MCP endpoint in front of many MCP servers, and an MCP client for any server.",
    after_help = "TARGET is a URL (http://127.0.0.1:3001/mcp) or, for a stdio server, the command after `--`:\n  manifold list tools -- node server.js stdio\n  manifold call http://127.0.0.1:3001/mcp echo --arg message=hi\n  manifold inspect --era modern -- mcp-server-time"
)]
pub struct Cli {
    /// More log output on stderr (repeat for more).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Log format on stderr: human-readable, or one JSON object per line (for log collectors).
    #[arg(long, value_enum, default_value_t = LogFormat::Human, global = true)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show a server's identity, negotiated era and revision, capabilities and catalog sizes.
    Inspect {
        #[command(flatten)]
        target: TargetArgs,
    },
    /// List a server's tools, resources, resource templates or prompts.
    List {
        /// What to list.
        what: ListWhat,
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Call a tool: `manifold call [URL] TOOL [--arg k=v ...] [--json '{...}'] [-- COMMAND...]`.
    Call {
        #[command(flatten)]
        target: TargetArgs,
        /// Tool argument as key=value, typed by the tool's input schema (repeatable).
        #[arg(long = "arg", value_name = "KEY=VALUE")]
        args: Vec<String>,
        /// All arguments as one JSON object (merged under --arg values).
        #[arg(long = "json-args", alias = "args-json", value_name = "JSON")]
        json_args: Option<String>,
    },
    /// Read a resource: `manifold read [URL] URI [-- COMMAND...]`.
    Read {
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Get a prompt: `manifold prompt [URL] NAME [--arg k=v ...] [-- COMMAND...]`.
    Prompt {
        #[command(flatten)]
        target: TargetArgs,
        /// Prompt argument as key=value (repeatable).
        #[arg(long = "arg", value_name = "KEY=VALUE")]
        args: Vec<String>,
    },
    /// Run the gateway: one MCP endpoint (Streamable HTTP at /mcp, legacy SSE at /sse) in front of every configured server.
    Serve {
        /// The configuration file (default: $MANIFOLD_CONFIG, else ./manifold.toml or ~/.config/manifold/manifold.toml if present, else built-in tools only).
        #[arg(long, short = 'c')]
        config: Option<PathBuf>,
        /// Where to listen, e.g. 127.0.0.1:7391 (default: gateway.listen).
        #[arg(long)]
        listen: Option<std::net::SocketAddr>,
        /// Serve without authentication even on an address other machines reach (only behind a proxy that authenticates; logged as a warning).
        #[arg(long)]
        insecure_no_auth: bool,
    },
    /// Create, list or revoke API keys for the gateway's clients.
    Keys {
        #[command(subcommand)]
        action: crate::keys::KeysAction,
    },
    /// Run the gateway for one client over stdin/stdout (for clients that launch a command).
    Stdio {
        /// The configuration file (default: $MANIFOLD_CONFIG, else ./manifold.toml or ~/.config/manifold/manifold.toml if present).
        #[arg(long, short = 'c')]
        config: Option<PathBuf>,
        /// Serve only this tool set (`[toolsets.NAME]`), as `/mcp/NAME` does over HTTP.
        #[arg(long, value_name = "NAME")]
        toolset: Option<String>,
    },
    /// Validate a configuration file and report every problem with its file, line and field.
    Check {
        /// The configuration file (default: $MANIFOLD_CONFIG, else ./manifold.toml or ~/.config/manifold/manifold.toml if present).
        config: Option<PathBuf>,
    },
    /// Show what the sandbox would enforce on this host: the kernel probe, a real strict sandbox around /bin/true, and each stdio server's sandbox (exit 1 when a server's `require` is unmet).
    Doctor {
        /// The configuration file (default: $MANIFOLD_CONFIG, else ./manifold.toml or ~/.config/manifold/manifold.toml if present, else built-in defaults).
        #[arg(long, short = 'c')]
        config: Option<PathBuf>,
    },
    /// Verify, tail, search or export the audit trail in the store (one row per call).
    Audit {
        #[command(subcommand)]
        action: crate::audit_commands::AuditAction,
    },
    /// List or approve pinned tool definitions (a changed definition waits for `pins approve`).
    Pins {
        #[command(subcommand)]
        action: crate::pins_commands::PinsAction,
    },
    /// List, show, approve or deny calls waiting for a person's approval (rules with `effect = "ask"`).
    Approvals {
        #[command(subcommand)]
        action: crate::approvals_commands::ApprovalsAction,
    },
    /// Let Manifold use an OAuth-protected HTTP server on your behalf: prints the authorization URL, waits for the redirect, stores the tokens (refreshed automatically).
    Login {
        /// The server's name in the configuration.
        server: String,
        /// The configuration file (default: $MANIFOLD_CONFIG, else ./manifold.toml or ~/.config/manifold/manifold.toml if present).
        #[arg(long, short = 'c')]
        config: Option<PathBuf>,
    },
    /// Convert an `mcpServers` JSON (Claude Desktop, Cursor, Claude Code, VS Code) or an MCP registry entry into Manifold's TOML on stdout.
    Import {
        /// The JSON file to convert (a client's configuration, or a registry `server.json`); with `--registry`, the server's registry name, NAME[@VERSION].
        file: PathBuf,
        /// An MCP registry's base URL (e.g. https://registry.modelcontextprotocol.io): import the server the argument names from it.
        #[arg(long, value_name = "URL")]
        registry: Option<String>,
    },
    /// Print a server's tools (or every tool Manifold exposes) as an AI API's tool definitions: `manifold export --format openai URL`.
    Export {
        /// Whose tool format: OpenAI Chat Completions, Anthropic Messages, or Gemini.
        #[arg(long, value_enum)]
        format: ExportFormat,
        /// Only this tool set of a Manifold gateway (its URL's `/mcp` becomes `/mcp/NAME`;
        /// `-- manifold stdio` gets `--toolset NAME`).
        #[arg(long, value_name = "NAME")]
        toolset: Option<String>,
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Add a server to manifold.toml, keeping its comments: `manifold add NAME URL` or `manifold add NAME -- COMMAND ARGS...`.
    Add {
        /// The server's name (its `[servers.NAME]` section, and its tools' prefix by default).
        name: String,
        /// An HTTP server's URL (Streamable HTTP or legacy SSE).
        url: Option<String>,
        /// A stdio server's command and arguments, after `--`.
        #[arg(last = true)]
        command: Vec<String>,
        /// An environment variable of a stdio server, `KEY=VALUE` (repeatable; `${VAR}` is read at start).
        #[arg(long = "env", value_name = "KEY=VALUE")]
        env: Vec<String>,
        /// A header of an HTTP server, `NAME=VALUE` (repeatable).
        #[arg(long = "header", value_name = "NAME=VALUE")]
        headers: Vec<String>,
        /// The prefix of its exposed names (default: the server's name).
        #[arg(long)]
        prefix: Option<String>,
        /// The configuration file (default: the one found as for serve, else ./manifold.toml, created).
        #[arg(long, short = 'c')]
        config: Option<PathBuf>,
    },
    /// Remove a server's section from manifold.toml.
    Remove {
        name: String,
        /// The configuration file (default: $MANIFOLD_CONFIG, else ./manifold.toml or ~/.config/manifold/manifold.toml if present).
        #[arg(long, short = 'c')]
        config: Option<PathBuf>,
    },
    /// Print a shell completion script: `manifold completions bash > /etc/bash_completion.d/manifold`.
    Completions { shell: clap_complete::Shell },
    /// Print the man page, or write one per command with --out-dir.
    Man {
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
    /// Act as the client for the official conformance suite (`conformance client --command "manifold conformance-client"`).
    #[command(hide = true)]
    ConformanceClient {
        /// The URL of the suite's mock server.
        url: String,
    },
}

/// The tool-definition formats `manifold export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// `tools` of OpenAI Chat Completions: `{"type":"function","function":{name, description, parameters}}`.
    Openai,
    /// `tools` of Anthropic Messages: `{name, description, input_schema}`.
    Anthropic,
    /// `tools` of Gemini: `[{"functionDeclarations":[{name, description, parametersJsonSchema}]}]`.
    Gemini,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum LogFormat {
    #[default]
    Human,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListWhat {
    Tools,
    Resources,
    Templates,
    Prompts,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum EraArg {
    #[default]
    Auto,
    Legacy,
    Modern,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum TransportArg {
    /// Streamable HTTP, falling back to legacy SSE.
    #[default]
    Auto,
    /// Streamable HTTP only.
    Http,
    /// Legacy HTTP+SSE only.
    Sse,
}

/// Where the server is and how to talk to it; shared by every client command.
#[derive(Debug, Clone, Args)]
pub struct TargetArgs {
    /// `[URL] [NAME]`: a URL first when the server is reached over HTTP, then the tool, URI or prompt name.
    #[arg(value_name = "URL|NAME")]
    pub positional: Vec<String>,
    /// The stdio server's command and arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// Which protocol era to speak.
    #[arg(long, value_enum, default_value_t = EraArg::Auto)]
    pub era: EraArg,
    /// Which HTTP transport to use for a URL.
    #[arg(long, value_enum, default_value_t = TransportArg::Auto)]
    pub transport: TransportArg,
    /// Extra HTTP header, 'Name: value' or 'Name=value' (repeatable).
    #[arg(long = "header", short = 'H', value_name = "'NAME: VALUE'")]
    pub headers: Vec<String>,
    /// Seconds for the whole connection set-up (era probe, handshake, first list), and for each answer after it.
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    pub timeout: f64,
    /// Environment variable for a stdio server, K=V (repeatable); the child otherwise starts from a minimal environment.
    #[arg(long = "env", short = 'e', value_name = "K=V")]
    pub env: Vec<String>,
    /// Working directory of a stdio server.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// PEM file of extra CA certificates to trust.
    #[arg(long, value_name = "FILE")]
    pub ca_bundle: Option<PathBuf>,
    /// PEM file with a client certificate and key (mTLS).
    #[arg(long, value_name = "FILE")]
    pub client_cert: Option<PathBuf>,
    /// Allow plain http:// to hosts other than loopback.
    #[arg(long)]
    pub allow_insecure_http: bool,
    /// Print the raw JSON-RPC result instead of a human rendering.
    #[arg(long)]
    pub json: bool,
    /// Answer the server's elicitation and sampling requests at the terminal (declares those capabilities).
    #[arg(long)]
    pub interactive: bool,
}
