//! Remote servers over streamable HTTP (through rmcp's client). There is no process
//! to signal: the session is the resource. Teardown ends the session with a DELETE
//! carrying its id; rmcp sends it but only logs its result, so the HTTP client here
//! wraps reqwest's and records how the DELETE went, and a failed DELETE makes a
//! failed teardown like any other (L5, L7).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_core::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

/// Where a remote server is and what to send with every request.
#[derive(Debug, Clone)]
pub struct Remote {
    pub url: String,
    /// Header name and value; values may hold secrets and are never shown.
    pub headers: Vec<(String, String)>,
}

/// How the DELETE that ends a session went: `None` while none was sent.
#[derive(Clone, Default)]
pub struct DeleteProbe(Arc<Mutex<Option<Result<(), String>>>>);

impl DeleteProbe {
    pub fn outcome(&self) -> Option<Result<(), String>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn record(&self, outcome: Result<(), String>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
    }
}

/// reqwest's client, with the DELETE of the session observed.
#[derive(Clone)]
pub struct ObservedClient {
    inner: reqwest::Client,
    probe: DeleteProbe,
}

impl ObservedClient {
    pub fn new(probe: DeleteProbe) -> ObservedClient {
        ObservedClient {
            inner: reqwest::Client::new(),
            probe,
        }
    }
}

type Headers = HashMap<HeaderName, HeaderValue>;
type Error = StreamableHttpError<reqwest::Error>;

/// Takes the URL out of an HTTP client error: a `url:` may carry a secret from
/// `${env:}` in its query, and rmcp logs these errors as they are.
fn scrub<T>(result: Result<T, Error>) -> Result<T, Error> {
    result.map_err(|e| match e {
        StreamableHttpError::Client(e) => StreamableHttpError::Client(e.without_url()),
        other => other,
    })
}

impl StreamableHttpClient for ObservedClient {
    type Error = reqwest::Error;

    fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse, Error>> + Send + '_ {
        let call = self
            .inner
            .post_message(uri, message, session_id, auth_header, custom_headers);
        async move { scrub(call.await) }
    }

    fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
        max_sse_event_size: usize,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse, Error>> + Send + '_ {
        let call = self.inner.post_message_with_max_sse_event_size(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            max_sse_event_size,
        );
        async move { scrub(call.await) }
    }

    fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
        limits: StreamableHttpResponseLimits,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse, Error>> + Send + '_ {
        let call = self.inner.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        );
        async move { scrub(call.await) }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> Result<(), Error> {
        let result = scrub(
            self.inner
                .delete_session(uri, session_id, auth_header, custom_headers)
                .await,
        );
        self.probe.record(match &result {
            Ok(()) | Err(StreamableHttpError::ServerDoesNotSupportDeleteSession) => Ok(()),
            Err(e) => Err(e.to_string()),
        });
        result
    }

    fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> impl Future<Output = Result<BoxStream<'static, Result<Sse, SseError>>, Error>> + Send + '_
    {
        let call =
            self.inner
                .get_stream(uri, session_id, last_event_id, auth_header, custom_headers);
        async move { scrub(call.await) }
    }

    fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
        max_sse_event_size: usize,
    ) -> impl Future<Output = Result<BoxStream<'static, Result<Sse, SseError>>, Error>> + Send + '_
    {
        let call = self.inner.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            max_sse_event_size,
        );
        async move { scrub(call.await) }
    }
}
