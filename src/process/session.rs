//! The MCP session with a server, over its stdin and stdout, through rmcp.
//!
//! The handshake is pinned to the newest protocol version that still has
//! `initialize` (rmcp's default announces one without it). The client declares the
//! `roots` capability and answers `roots/list` with an empty list, so that servers
//! which ask for roots right after the handshake (with request id 0) get a proper
//! answer. This module holds no deadlines of its own: the authority bounds every
//! call.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, Implementation, InitializeRequestParams,
    ProtocolVersion, Tool,
};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceError};
use rmcp::{ClientHandler, ServiceExt};
use tokio::io::{AsyncRead, AsyncWrite};

/// mcpfleet's side of an MCP session. rmcp's default handlers answer `ping` and
/// `roots/list` (with no roots), and refuse sampling and elicitation.
#[derive(Debug, Clone, Default)]
pub struct FleetClient;

impl ClientHandler for FleetClient {
    fn get_info(&self) -> InitializeRequestParams {
        let mut capabilities = ClientCapabilities::default();
        capabilities.roots = Some(Default::default());
        InitializeRequestParams::new(
            capabilities,
            Implementation::new("mcpfleet", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

/// Why a session could not be set up or used.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The server closed its output before or during the handshake.
    #[error("the server closed the connection during the handshake: {0}")]
    Closed(String),
    /// The server answered, but not as MCP requires.
    #[error("protocol error: {0}")]
    Protocol(String),
}

/// An initialized MCP session.
pub struct Session {
    service: RunningService<RoleClient, FleetClient>,
}

impl Session {
    /// Runs the initialize handshake over `output` (the server's stdout) and `input`
    /// (its stdin). Unbounded by itself: the caller wraps it in the connect deadline,
    /// and dropping the future closes the pipes.
    pub async fn initialize<R, W>(output: R, input: W) -> Result<Session, SessionError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        use rmcp::service::ClientInitializeError as E;
        match FleetClient.serve((output, input)).await {
            Ok(service) => Ok(Session { service }),
            Err(e @ (E::ConnectionClosed(_) | E::TransportError { .. })) => {
                Err(SessionError::Closed(e.to_string()))
            }
            Err(e) => Err(SessionError::Protocol(e.to_string())),
        }
    }

    /// Runs the initialize handshake with a remote server over streamable HTTP.
    /// `probe` learns how the DELETE that ends the session goes.
    pub async fn initialize_http(
        remote: &crate::process::remote::Remote,
        probe: crate::process::remote::DeleteProbe,
    ) -> Result<Session, SessionError> {
        use rmcp::service::ClientInitializeError as E;
        use rmcp::transport::streamable_http_client::{
            StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
        };
        let mut headers = std::collections::HashMap::new();
        for (name, value) in &remote.headers {
            // Values may be secrets: errors name the header, never its value.
            let name = http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| SessionError::Protocol(format!("invalid header name `{name}`")))?;
            let value = http::HeaderValue::from_str(value).map_err(|_| {
                SessionError::Protocol(format!("invalid value for header `{name}`"))
            })?;
            headers.insert(name, value);
        }
        let config = StreamableHttpClientTransportConfig::with_uri(remote.url.as_str())
            .custom_headers(headers);
        let transport = StreamableHttpClientTransport::with_client(
            crate::process::remote::ObservedClient::new(probe),
            config,
        );
        match FleetClient.serve(transport).await {
            Ok(service) => Ok(Session { service }),
            Err(e @ (E::ConnectionClosed(_) | E::TransportError { .. })) => {
                Err(SessionError::Closed(e.to_string()))
            }
            Err(e) => Err(SessionError::Protocol(e.to_string())),
        }
    }

    /// The server's name and version as it announced them.
    pub fn server_info(&self) -> Option<String> {
        let info = self.service.peer().peer_info()?;
        let server = info.server_info.as_ref()?;
        Some(format!("{} {}", server.name, server.version))
    }

    /// All tools, following pagination.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, SessionError> {
        self.service
            .peer()
            .list_all_tools()
            .await
            .map_err(request_error)
    }

    /// Ends the session: stops the service loop, which drops the transport and so
    /// closes the server's stdin (or, over HTTP, sends the DELETE that ends the
    /// session). Bounded by `limit`; past it the session is dropped, which cancels
    /// it all the same. True when it ended within the limit.
    pub async fn close(mut self, limit: Duration) -> bool {
        matches!(self.service.close_with_timeout(limit).await, Ok(Some(_)))
    }

    /// A handle for requests made outside the authority (`tools`, `call`): they
    /// fail at once when the session is closed, so a torn-down server never leaves
    /// a caller hanging.
    pub fn peer(&self) -> Peer<RoleClient> {
        self.service.peer().clone()
    }
}

/// An MCP `ping`; unbounded by itself (the caller adds the health timeout).
pub async fn ping(peer: &Peer<RoleClient>) -> Result<(), SessionError> {
    use rmcp::model::{ClientRequest, PingRequest, ServerResult};
    match peer
        .send_request(ClientRequest::PingRequest(PingRequest::default()))
        .await
    {
        Ok(ServerResult::EmptyResult(_)) => Ok(()),
        Ok(_) => Ok(()),
        Err(e) => Err(request_error(e)),
    }
}

/// All tools of the server behind `peer`.
pub async fn list_tools(peer: &Peer<RoleClient>) -> Result<Vec<Tool>, SessionError> {
    peer.list_all_tools().await.map_err(request_error)
}

/// Calls `tool` with `arguments` (a JSON object) and returns the result as JSON.
pub async fn call_tool(
    peer: &Peer<RoleClient>,
    tool: &str,
    arguments: Option<serde_json::Map<String, serde_json::Value>>,
) -> Result<serde_json::Value, SessionError> {
    let mut params = CallToolRequestParams::new(tool.to_owned());
    if let Some(args) = arguments {
        params = params.with_arguments(args);
    }
    let result = peer.call_tool(params).await.map_err(request_error)?;
    serde_json::to_value(result).map_err(|e| SessionError::Protocol(e.to_string()))
}

fn request_error(e: ServiceError) -> SessionError {
    match e {
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
            SessionError::Closed(e.to_string())
        }
        other => SessionError::Protocol(other.to_string()),
    }
}
