//! The one server both transports serve: what a minimal rmcp server with every primitive looks like,
//! written the way the SDK's documentation suggests (tool and prompt macros, hand-written resources).

use rmcp::handler::server::router::prompt::PromptRouter;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, ListResourcesResult, PaginatedRequestParams,
    PromptMessage, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, Role, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, prompt, prompt_handler, prompt_router, schemars};
use rmcp::{tool, tool_handler, tool_router};
use serde::Deserialize;

/// The fixed resource this peer serves.
pub const HELLO_URI: &str = "test://rmcp/hello";
/// Its text.
pub const HELLO_TEXT: &str = "Hello from the rmcp peer";

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct EchoArgs {
    /// The text to send back.
    pub message: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AddArgs {
    pub a: i64,
    pub b: i64,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct GreetingArgs {
    /// Who to greet.
    pub name: String,
}

#[derive(Debug, Clone)]
pub struct RmcpPeer {
    tool_router: ToolRouter<Self>,
    prompt_router: PromptRouter<Self>,
}

impl RmcpPeer {
    pub fn new() -> Self {
        Self {
            tool_router: Self::tool_router(),
            prompt_router: Self::prompt_router(),
        }
    }
}

#[tool_router]
impl RmcpPeer {
    #[tool(description = "Return the message unchanged.")]
    fn echo(&self, Parameters(EchoArgs { message }): Parameters<EchoArgs>) -> String {
        message
    }

    #[tool(description = "Add two integers.")]
    fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> CallToolResult {
        match a.checked_add(b) {
            Some(sum) => CallToolResult::success(vec![ContentBlock::text(sum.to_string())]),
            None => CallToolResult::error(vec![ContentBlock::text(format!(
                "{a} + {b} does not fit in a 64-bit integer"
            ))]),
        }
    }
}

#[prompt_router]
impl RmcpPeer {
    #[prompt(description = "A one-message prompt greeting `name`.")]
    async fn greeting(
        &self,
        Parameters(GreetingArgs { name }): Parameters<GreetingArgs>,
    ) -> Vec<PromptMessage> {
        vec![PromptMessage::new_text(
            Role::User,
            format!("Please greet {name} warmly."),
        )]
    }
}

#[tool_handler(router = self.tool_router)]
#[prompt_handler(router = self.prompt_router)]
impl ServerHandler for RmcpPeer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_prompts()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("manifold-rmcp-peer", "1.0.0"))
        .with_instructions("Test peer for Manifold.")
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(vec![
            Resource::new(HELLO_URI, "hello")
                .with_description("A fixed text resource.")
                .with_mime_type("text/plain"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri != HELLO_URI {
            return Err(ErrorData::resource_not_found(
                format!(
                    "no resource {}; this peer serves only {HELLO_URI}",
                    request.uri
                ),
                None,
            ));
        }
        Ok(ReadResourceResult::new(vec![ResourceContents::text(HELLO_TEXT, HELLO_URI)]).into())
    }
}
