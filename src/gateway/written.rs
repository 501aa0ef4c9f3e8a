//! What rmcp cannot carry, put back on the way to the client. rmcp's `Tool`
//! keeps only the fields it models, so the gateway's `tools/list` is built by
//! the session as rmcp's result (every rule of its era applied) and then given
//! each tool as its server wrote it, under its exposed name (docs/design.md
//! §14, "Values as written"). The stdio door serves [`AsWritten`]; the HTTP
//! door's session manager (`resume.rs`) applies [`message_as_written`] to
//! what it streams. The input-required results that carry a legacy server's
//! requests to a 2026-07-28 client (`inputs.rs`) get those requests back as
//! the server wrote them: [`AsWritten`] at the stdio door, [`http_as_written`]
//! on the HTTP door's answers of that era.

use std::borrow::Cow;

use rmcp::Service;
use rmcp::model::{
    ClientNotification, ClientRequest, CustomNotification, CustomResult, ErrorData,
    InitializeResult, JsonRpcMessage, JsonRpcNotification, JsonRpcResponse, ListToolsResult,
    ProtocolVersion, ServerJsonRpcMessage, ServerNotification, ServerResult,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use serde_json::Value;

use super::clients::WrittenParams;
use super::relay::Untokened;
use super::{ClientSession, Gateway};

/// `listed` with each tool as its server wrote it (the name aside), as a
/// result of its own; `None` when no tool has more than rmcp wrote (a tool of
/// a catalog no longer current stays as rmcp wrote it).
pub(super) fn written(gateway: &Gateway, listed: &ListToolsResult) -> Option<ServerResult> {
    let raw: Vec<_> = listed
        .tools
        .iter()
        .map(|tool| gateway.tool_as_written(tool))
        .collect();
    if raw.iter().all(Option::is_none) {
        return None;
    }
    let Ok(Value::Object(mut result)) = serde_json::to_value(listed) else {
        return None;
    };
    let tools = listed
        .tools
        .iter()
        .zip(raw)
        .map(|(tool, raw)| match raw {
            Some(raw) => Value::Object(raw.as_ref().clone()),
            None => serde_json::to_value(tool).unwrap_or_default(),
        })
        .collect();
    result.insert("tools".into(), Value::Array(tools));
    Some(ServerResult::CustomResult(CustomResult(Value::Object(result))))
}

/// `message` as written: a relayed request without the progress token rmcp
/// gave it ([`Untokened`]); an answer to `tools/list` with what [`written`] puts
/// back; a progress notification with the params its server wrote, kept
/// beside rmcp's reading by the client's queue (`clients.rs`).
pub(super) fn message_as_written(
    gateway: &Gateway,
    message: &ServerJsonRpcMessage,
) -> Option<ServerJsonRpcMessage> {
    if let JsonRpcMessage::Notification(JsonRpcNotification {
        jsonrpc,
        notification: ServerNotification::ProgressNotification(progress),
    }) = message
    {
        let WrittenParams(params) = progress.extensions.get::<WrittenParams>()?;
        return Some(JsonRpcMessage::Notification(JsonRpcNotification {
            jsonrpc: *jsonrpc,
            notification: ServerNotification::CustomNotification(CustomNotification::new(
                "notifications/progress",
                Some(Value::Object(params.clone())),
            )),
        }));
    }
    if let JsonRpcMessage::Request(request) = message
        && rmcp::model::GetExtensions::extensions(&request.request)
            .get::<Untokened>()
            .is_some()
    {
        let mut message = message.clone();
        untokened(&mut message);
        return Some(message);
    }
    if let Some(initialized) = super::legacy_tasks::initialized(gateway, &None, message) {
        return Some(initialized);
    }
    let JsonRpcMessage::Response(JsonRpcResponse {
        jsonrpc,
        id,
        result: ServerResult::ListToolsResult(listed),
    }) = message
    else {
        return None;
    };
    Some(JsonRpcMessage::Response(JsonRpcResponse {
        jsonrpc: *jsonrpc,
        id: id.clone(),
        result: written(gateway, listed)?,
    }))
}


/// `message` without the progress token rmcp gave it, when it is a request
/// marked [`Untokened`] (`_meta` goes too when that was all it held).
pub(crate) fn untokened(message: &mut ServerJsonRpcMessage) {
    use rmcp::model::{GetExtensions, GetMeta};
    let JsonRpcMessage::Request(request) = message else {
        return;
    };
    if request.request.extensions().get::<Untokened>().is_none() {
        return;
    }
    let meta = request.request.get_meta_mut();
    meta.remove("progressToken");
    // A request relayed as written keeps its `_meta` among its extensions,
    // written even when empty.
    if meta.is_empty()
        && let rmcp::model::ServerRequest::CustomRequest(custom) = &mut request.request
    {
        custom.extensions.remove::<rmcp::model::RequestMetaObject>();
    }
}

/// The stdio door's transport: [`untokened`] applied to what it writes, and
/// the answer to `initialize` given the `tasks` capability of protocol
/// 2025-11-25 that the servers of the session's scope declare.
pub(crate) struct UntokenedTransport<T>(pub(crate) T, pub(crate) Option<(std::sync::Arc<Gateway>, super::member::Scope)>);

impl<T: rmcp::transport::Transport<RoleServer>> rmcp::transport::Transport<RoleServer>
    for UntokenedTransport<T>
{
    type Error = T::Error;

    fn send(
        &mut self,
        mut item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        untokened(&mut item);
        if let Some((gateway, scope)) = &self.1
            && let Some(initialized) = super::legacy_tasks::initialized(gateway, scope, &item)
        {
            item = initialized;
        }
        self.0.send(item)
    }

    fn receive(
        &mut self,
    ) -> impl Future<Output = Option<rmcp::service::RxJsonRpcMessage<RoleServer>>> + Send {
        self.0.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.0.close()
    }
}

/// A client session as the stdio door serves it.
pub(crate) struct AsWritten(pub(crate) ClientSession);

impl Service<RoleServer> for AsWritten {
    async fn handle_request(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let result = Service::handle_request(&self.0, request, context).await?;
        match &result {
            ServerResult::ListToolsResult(listed) => {
                Ok(written(&self.0.gateway(), listed).unwrap_or(result))
            }
            // A legacy server's requests put to a 2026-07-28 client, as the
            // server wrote them (`inputs.rs`).
            ServerResult::InputRequiredResult(asked) => Ok(self
                .0
                .gateway()
                .inputs()
                .written(asked)
                .map_or(result, |written| ServerResult::CustomResult(CustomResult(written)))),
            _ => Ok(result),
        }
    }

    async fn handle_notification(
        &self,
        notification: ClientNotification,
        context: NotificationContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Service::handle_notification(&self.0, notification, context).await
    }

    fn get_info(&self) -> InitializeResult {
        Service::get_info(&self.0)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Service::supported_protocol_versions(&self.0)
    }
}

/// A 2026-07-28 answer of the HTTP door, its input-required results made by
/// `inputs.rs` with each request as its server wrote it: rmcp writes the
/// result from its types, which read a float such as `temperature` as 32 bits.
/// Only an event (or a JSON body) that holds `"input_required"` and a state of
/// the gateway's form is read; everything else passes as it is.
pub(crate) fn http_as_written(
    gateway: &std::sync::Arc<Gateway>,
    response: http::Response<http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>>,
) -> http::Response<http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>> {
    use http_body_util::BodyExt;
    let gateway = std::sync::Arc::downgrade(gateway);
    response.map(|body| {
        body.map_frame(move |frame| match frame.into_data() {
            Ok(data) => match gateway.upgrade() {
                Some(gateway) => hyper::body::Frame::data(frame_as_written(&gateway, data)),
                None => hyper::body::Frame::data(data),
            },
            Err(frame) => frame,
        })
        .boxed()
    })
}

/// One frame of an answer (a JSON body, or one server-sent event) as written.
fn frame_as_written(gateway: &Gateway, data: bytes::Bytes) -> bytes::Bytes {
    let finder = |needle: &[u8]| memchr::memmem::find(&data, needle).is_some();
    if !finder(b"\"input_required\"") || !finder(b"mcpfleet1.") {
        return data;
    }
    let Ok(text) = std::str::from_utf8(&data) else {
        return data;
    };
    if text.trim_start().starts_with('{') {
        return message_written(gateway, text.trim()).map_or(data, bytes::Bytes::from);
    }
    let mut out = String::with_capacity(text.len());
    let mut changed = false;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\r', '\n']);
        let written = body
            .strip_prefix("data:")
            .and_then(|json| message_written(gateway, json.trim_start()));
        match written {
            Some(json) => {
                out.push_str("data: ");
                out.push_str(&json);
                out.push_str(&line[body.len()..]);
                changed = true;
            }
            None => out.push_str(line),
        }
    }
    if changed { bytes::Bytes::from(out) } else { data }
}

/// A JSON-RPC message whose result is an input-required result of
/// `inputs.rs`, with its requests as written.
fn message_written(gateway: &Gateway, json: &str) -> Option<String> {
    let mut message: Value = serde_json::from_str(json).ok()?;
    let result = message.get_mut("result")?;
    if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
        return None;
    }
    if !gateway.inputs().rewrite(result) {
        return None;
    }
    serde_json::to_string(&message).ok()
}
