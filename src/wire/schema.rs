//! The marker types that `#[utoipa::path]` annotations name for the bodies whose schemas are
//! written by hand (the parsers read them from a JSON `Value`, so no derive can describe them).
//! Each is only a name here; `openapi.rs` writes its schema into the document under that name.

use std::borrow::Cow;

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{Object, Schema};

/// A request-body schema written by hand: a marker type for `#[utoipa::path]`, its component
/// name, and a placeholder schema (the OpenAPI document, `openapi.rs`, inserts the real one).
macro_rules! hand_written_schema {
    ($(#[$doc:meta])* $ty:ident) => {
        $(#[$doc])*
        pub struct $ty;

        impl utoipa::PartialSchema for $ty {
            fn schema() -> RefOr<Schema> {
                // A placeholder: the document replaces it with the hand-written schema.
                RefOr::T(Schema::Object(Object::new()))
            }
        }

        impl utoipa::ToSchema for $ty {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($ty))
            }
        }
    };
}

hand_written_schema!(
    /// `POST /api/agents/publish` and `PUT /api/agents/{id}`.
    PublishRequest
);
hand_written_schema!(
    /// `POST /api/namespaces`.
    ClaimNamespaceRequest
);
hand_written_schema!(
    /// `POST /api/bindings`.
    CreateBindingRequest
);
hand_written_schema!(
    /// `POST /public/agents/search`, `/a2a/discover`, the playground's discover.
    SearchRequest
);
hand_written_schema!(
    /// `POST /ard/search`.
    ArdSearchRequest
);
hand_written_schema!(
    /// `POST /ard/explore`.
    ArdExploreRequest
);
hand_written_schema!(
    /// An ARD entry.
    ArdEntry
);
hand_written_schema!(
    /// `/.well-known/ard.json`.
    ArdManifest
);
hand_written_schema!(
    /// The answer of `POST /ard/search`.
    ArdSearchResponse
);
hand_written_schema!(
    /// The answer of `POST /ard/explore`.
    ArdExploreResponse
);
hand_written_schema!(
    /// The answer of `GET /ard/agents`.
    ArdListResponse
);
hand_written_schema!(
    /// `POST /api/tokens`.
    CreateTokenRequest
);
hand_written_schema!(
    /// `POST /api/auth/oidc`.
    OidcExchangeRequest
);
hand_written_schema!(
    /// `POST /api/auth/github`.
    GithubExchangeRequest
);
hand_written_schema!(
    /// `POST /api/orgs`.
    CreateOrgRequest
);
hand_written_schema!(
    /// `PUT /api/orgs/{org}/members/{owner}`.
    SetMemberRequest
);
hand_written_schema!(
    /// `PUT /api/orgs/{org}/github`.
    GithubLinkRequest
);
hand_written_schema!(
    /// `POST /api/agents/{id}/transfer`.
    TransferRequest
);
hand_written_schema!(
    /// `POST /api/agents/{id}/deprecate`.
    DeprecateRequest
);
hand_written_schema!(
    /// `POST /api/playground/session`.
    CreateSessionRequest
);
hand_written_schema!(
    /// `POST /api/playground/session/{id}/execute`.
    ExecuteRequest
);
hand_written_schema!(
    /// `POST /a2a/utility/{name}`.
    HostedAgentRequest
);
hand_written_schema!(
    /// `POST /a2a/message`.
    LegacyMessage
);
hand_written_schema!(
    /// A JSON-RPC 2.0 request or batch.
    JsonRpcRequest
);
hand_written_schema!(
    /// A JSON-RPC 2.0 response or batch of responses.
    JsonRpcResponse
);
hand_written_schema!(
    /// A JSON-RPC 2.0 error response with a null id (authentication, media type, body size).
    JsonRpcErrorResponse
);
hand_written_schema!(
    /// One MCP JSON-RPC message (`POST /mcp`).
    McpMessage
);
hand_written_schema!(
    /// The answer to one MCP request: a result or an error.
    McpResponse
);
hand_written_schema!(
    /// An MCP JSON-RPC error response.
    McpErrorResponse
);
hand_written_schema!(
    /// An A2A agent card (or the registry's own shape of its card).
    AgentCard
);
hand_written_schema!(
    /// `/a2a/discover`'s answer.
    DiscoverAnswer
);
hand_written_schema!(
    /// The playground's discover answer.
    PlaygroundDiscoverAnswer
);
hand_written_schema!(
    /// One recorded playground step.
    SessionStep
);
hand_written_schema!(
    /// A hosted agent's answer over REST.
    HostedAgentAnswer
);
hand_written_schema!(
    /// `/a2a/message`'s answer.
    LegacyMessageAnswer
);
hand_written_schema!(
    /// The `facets` member of a search answer.
    SearchFacets
);
hand_written_schema!(
    /// `/healthz`.
    Health
);
hand_written_schema!(
    /// `/readyz`.
    Readiness
);
