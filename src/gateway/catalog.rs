//! What the gateway knows of what each server offers (its tools, prompts,
//! resources and templates, per generation), and the catalogs built from it:
//! every server's items renamed and filtered, and how their names route back.
//!
//! A tool is kept as its server listed it too ([`MemberTool`]): rmcp's `Tool`
//! knows only the fields it models, and the gateway's `tools/list` gives each
//! tool as its server wrote it, its name aside (docs/design.md §14, "Values as
//! written").

use std::sync::Arc;

use rmcp::model::{JsonObject, Prompt, Resource, ResourceTemplate, Tool};
use rmcp::service::ServiceError;

use crate::process::session::{Answer, Link, Pending, Reachable};

use super::member::Exposure;
use super::names;
use crate::lifecycle::Generation;

/// What the gateway last learned of one server's lists, per generation.
pub(super) struct Known<T> {
    pub(super) generation: Option<Generation>,
    /// False once the server said its list changed.
    pub(super) fresh: bool,
    pub(super) items: Arc<Vec<T>>,
}

impl<T> Default for Known<T> {
    fn default() -> Known<T> {
        Known {
            generation: None,
            fresh: false,
            items: Arc::new(Vec::new()),
        }
    }
}

/// What the gateway last learned of one server's lists.
#[derive(Default)]
pub(super) struct Lists {
    pub(super) tools: Known<MemberTool>,
    pub(super) prompts: Known<Prompt>,
    pub(super) resources: Known<Resource>,
    pub(super) templates: Known<ResourceTemplate>,
}

/// A list a server offers.
pub(super) trait Listing: Clone + Send + Sync + 'static {
    /// Whether a server with these capabilities offers the list at all.
    fn offered(caps: &rmcp::model::ServerCapabilities) -> bool;
    fn known(lists: &Lists) -> &Known<Self>;
    /// What was learned, as a message to the gateway's task.
    fn learnt(known: Known<Self>) -> Learnt;
    fn fetch(
        session: &Reachable,
    ) -> impl Future<Output = Result<Vec<Self>, ServiceError>> + Send;
}

/// One list of one server, as learned from its running generation.
pub(super) enum Learnt {
    Tools(Known<MemberTool>),
    Prompts(Known<Prompt>),
    Resources(Known<Resource>),
    Templates(Known<ResourceTemplate>),
}

impl Learnt {
    /// Keeps what was learned in `lists`, in place of what was known.
    pub(super) fn keep(self, lists: &mut Lists) {
        match self {
            Learnt::Tools(known) => lists.tools = known,
            Learnt::Prompts(known) => lists.prompts = known,
            Learnt::Resources(known) => lists.resources = known,
            Learnt::Templates(known) => lists.templates = known,
        }
    }
}

macro_rules! listing {
    ($t:ty, $field:ident, $variant:ident, $cap:ident, $fetch:ident) => {
        impl Listing for $t {
            fn offered(caps: &rmcp::model::ServerCapabilities) -> bool {
                caps.$cap.is_some()
            }
            fn known(lists: &Lists) -> &Known<Self> {
                &lists.$field
            }
            fn learnt(known: Known<Self>) -> Learnt {
                Learnt::$variant(known)
            }
            fn fetch(
                session: &Reachable,
            ) -> impl Future<Output = Result<Vec<Self>, ServiceError>> + Send {
                let peer = session.peer().clone();
                async move { peer.$fetch().await }
            }
        }
    };
}

/// A server's tool: as rmcp reads it (for routing and filtering), and as the
/// server wrote it, every field kept.
#[derive(Clone, Debug)]
pub(super) struct MemberTool {
    pub(super) tool: Tool,
    pub(super) raw: Arc<JsonObject>,
}

impl MemberTool {
    /// A tool as its server wrote it; an error when rmcp cannot read it.
    fn written(raw: JsonObject) -> Result<MemberTool, serde_json::Error> {
        let tool = serde_json::from_value(serde_json::Value::Object(raw.clone()))?;
        Ok(MemberTool {
            tool,
            raw: Arc::new(raw),
        })
    }
}

impl Listing for MemberTool {
    fn offered(caps: &rmcp::model::ServerCapabilities) -> bool {
        caps.tools.is_some()
    }
    fn known(lists: &Lists) -> &Known<Self> {
        &lists.tools
    }
    fn learnt(known: Known<Self>) -> Learnt {
        Learnt::Tools(known)
    }
    /// Every page, as written: through the session's link over stdio (to a
    /// server of the 2026-07-28 era with that era's `_meta`, as rmcp would
    /// send it), through a side request of its own over HTTP; through rmcp
    /// otherwise, which keeps only the fields it models.
    /// A remote server of the 2026-07-28 era is asked through rmcp too, first: rmcp's
    /// client learns each tool's `inputSchema` from the lists it reads, for
    /// the `Mcp-Param-*` headers of its calls, and drops the tools it will not
    /// call (invalid `x-mcp-header`s), which are left out here too.
    fn fetch(
        session: &Reachable,
    ) -> impl Future<Output = Result<Vec<Self>, ServiceError>> + Send {
        let peer = session.peer().clone();
        let link = session.link().cloned();
        let side = session.sideband().cloned();
        let modern = session.modern_link().map(|(link, meta)| (link.clone(), meta.clone()));
        async move {
            // The tools rmcp keeps of a remote server of the 2026-07-28 era
            // (it drops those whose `x-mcp-header`s are invalid): only these
            // are listed, as written.
            let mut kept: Option<std::collections::HashSet<String>> = None;
            let lane = match (link, side) {
                (Some(link), _) => Lane::Link(link),
                (None, Some(side)) => {
                    if side.modern() {
                        let read = peer.list_all_tools().await?;
                        kept = Some(read.into_iter().map(|t| t.name.into_owned()).collect());
                    }
                    Lane::Side(side)
                }
                (None, None) if let Some((link, meta)) = modern => Lane::Modern(link, meta),
                (None, None) => {
                    let tools = peer.list_all_tools().await?;
                    return Ok(tools
                        .into_iter()
                        .map(|tool| {
                            let raw = match serde_json::to_value(&tool) {
                                Ok(serde_json::Value::Object(raw)) => raw,
                                _ => JsonObject::new(),
                            };
                            MemberTool {
                                tool,
                                raw: Arc::new(raw),
                            }
                        })
                        .collect());
                }
            };
            let mut tools = Vec::new();
            let mut cursor: Option<String> = None;
            loop {
                let page = lane.page("tools/list", cursor.take()).await?;
                let serde_json::Value::Object(mut page) = page else {
                    return Err(ServiceError::UnexpectedResponse);
                };
                let Some(serde_json::Value::Array(listed)) = page.remove("tools") else {
                    return Err(ServiceError::UnexpectedResponse);
                };
                for tool in listed {
                    let serde_json::Value::Object(raw) = tool else {
                        return Err(ServiceError::UnexpectedResponse);
                    };
                    if let Some(kept) = &kept
                        && !raw.get("name").and_then(|n| n.as_str()).is_some_and(|n| kept.contains(n))
                    {
                        continue;
                    }
                    tools.push(
                        MemberTool::written(raw).map_err(|_| ServiceError::UnexpectedResponse)?,
                    );
                }
                match page.remove("nextCursor") {
                    Some(serde_json::Value::String(next)) if !next.is_empty() => {
                        cursor = Some(next);
                    }
                    _ => return Ok(tools),
                }
            }
        }
    }
}

/// Where a request goes beside rmcp, its answer as the server wrote it: a
/// stdio session's link, or a remote session's side requests.
pub(super) enum Lane {
    Link(Link),
    Side(crate::process::remote::Sideband),
    /// A stdio session's link to a server of the 2026-07-28 era, and the
    /// `_meta` each request carries (a request's own `_meta` keys added).
    Modern(Link, Arc<JsonObject>),
}

impl Lane {
    /// The lane of a session of the legacy era, if it has one.
    pub(super) fn legacy(session: &Reachable) -> Option<Lane> {
        match (session.link(), session.sideband()) {
            (Some(link), _) => Some(Lane::Link(link.clone())),
            (None, Some(side)) if !side.modern() => Some(Lane::Side(side.clone())),
            _ => None,
        }
    }

    /// One page of `method`'s list, as the server wrote it.
    async fn page(&self, method: &str, cursor: Option<String>) -> Result<serde_json::Value, ServiceError> {
        let mut params = serde_json::Map::new();
        if let Some(cursor) = cursor {
            params.insert("cursor".into(), cursor.into());
        }
        self.request(method, params).await
    }

    /// `method` with `params`: the server's `result` as written, or its error.
    pub(super) async fn request(
        &self,
        method: &str,
        params: serde_json::Map<String, serde_json::Value>,
    ) -> Result<serde_json::Value, ServiceError> {
        match self {
            Lane::Link(link) => {
                let params = serde_json::Value::Object(params).to_string();
                raw_request(link, method, params).await
            }
            Lane::Side(side) => side.request(method, params).await,
            Lane::Modern(link, meta) => {
                let mut params = params;
                let mut own = meta.as_ref().clone();
                if let Some(serde_json::Value::Object(given)) = params.remove("_meta") {
                    own.extend(given);
                }
                params.insert("_meta".into(), serde_json::Value::Object(own));
                let params = serde_json::Value::Object(params).to_string();
                raw_request(link, method, params).await
            }
        }
    }
}

/// A request sent through `link` beside rmcp's session, with `params` (JSON
/// text): the server's `result` as it wrote it (numbers as written), or its
/// error. Dropped before the answer, the server is told.
async fn raw_request(
    link: &Link,
    method: &str,
    params: String,
) -> Result<serde_json::Value, ServiceError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let sent = link.request(method, |_| {
        let write = move |q: &mut Vec<u8>| q.extend_from_slice(params.as_bytes());
        (write, Box::new(Once(Some(tx))) as crate::process::session::Waiter)
    });
    let Some(id) = sent else {
        return Err(ServiceError::TransportClosed);
    };
    struct Unanswered<'a>(&'a Link, u64, bool);
    impl Drop for Unanswered<'_> {
        fn drop(&mut self) {
            if !self.2 {
                self.0.abandon(self.1, "the gateway no longer waits for the answer");
            }
        }
    }
    let mut guard = Unanswered(link, id, false);
    let answer = rx.await.map_err(|_| ServiceError::TransportClosed)?;
    guard.2 = true;
    answer
}

/// The waiter of one [`raw_request`].
struct Once(Option<tokio::sync::oneshot::Sender<Result<serde_json::Value, ServiceError>>>);

impl Pending for Once {
    fn progress(&mut self, _params: &serde_json::value::RawValue) {}

    fn answered(mut self: Box<Self>, answer: Answer<'_>) {
        let outcome = match answer {
            Answer::Result(result) => serde_json::from_str(result.get())
                .map_err(|_| ServiceError::UnexpectedResponse),
            Answer::Error(error) => Err(serde_json::from_str(error.get())
                .map(ServiceError::McpError)
                .unwrap_or(ServiceError::UnexpectedResponse)),
            Answer::Ended | Answer::Abandoned => Err(ServiceError::TransportClosed),
        };
        if let Some(tx) = self.0.take() {
            let _ = tx.send(outcome);
        }
    }
}

listing!(Prompt, prompts, Prompts, prompts, list_all_prompts);
listing!(Resource, resources, Resources, resources, list_all_resources);
listing!(
    ResourceTemplate,
    templates,
    Templates,
    resources,
    list_all_resource_templates
);

/// An item the gateway shows under a name of its own.
pub(super) trait Named: Sized {
    fn name(&self) -> &str;
    fn renamed(&self, name: String) -> Self;
    /// The catalog of these items as last built.
    fn kept(catalogs: &Catalogs) -> Option<&Catalog<Self>>;
    /// A catalog just built, as a message to the gateway's task.
    fn built(catalog: Catalog<Self>) -> Built;
}

/// The catalogs as last built: built again only when a server's list or
/// exposure changed.
#[derive(Default)]
pub(super) struct Catalogs {
    pub(super) tools: Option<Catalog<MemberTool>>,
    pub(super) prompts: Option<Catalog<Prompt>>,
}

/// A catalog just built.
pub(super) enum Built {
    Tools(Catalog<MemberTool>),
    Prompts(Catalog<Prompt>),
}

impl Built {
    /// Keeps the catalog in `catalogs`, in place of the one before.
    pub(super) fn keep(self, catalogs: &mut Catalogs) {
        match self {
            Built::Tools(catalog) => catalogs.tools = Some(catalog),
            Built::Prompts(catalog) => catalogs.prompts = Some(catalog),
        }
    }
}

impl Named for MemberTool {
    fn name(&self) -> &str {
        &self.tool.name
    }
    /// The name changes in both; nothing else does.
    fn renamed(&self, name: String) -> MemberTool {
        let mut tool = self.tool.clone();
        tool.name = name.clone().into();
        let mut raw = self.raw.as_ref().clone();
        raw.insert("name".into(), serde_json::Value::String(name));
        MemberTool {
            tool,
            raw: Arc::new(raw),
        }
    }
    fn kept(catalogs: &Catalogs) -> Option<&Catalog<MemberTool>> {
        catalogs.tools.as_ref()
    }
    fn built(catalog: Catalog<MemberTool>) -> Built {
        Built::Tools(catalog)
    }
}

impl Named for Prompt {
    fn name(&self) -> &str {
        &self.name
    }
    fn renamed(&self, name: String) -> Prompt {
        let mut prompt = self.clone();
        prompt.name = name;
        prompt
    }
    fn kept(catalogs: &Catalogs) -> Option<&Catalog<Prompt>> {
        catalogs.prompts.as_ref()
    }
    fn built(catalog: Catalog<Prompt>) -> Built {
        Built::Prompts(catalog)
    }
}

/// Exposed items (renamed, filtered) and how their names route back, as built
/// from `from`: per server its index, the list it had (the same `Arc` means the
/// same list) and its exposure.
pub(super) struct Catalog<T> {
    pub(super) from: Vec<(usize, Arc<Vec<T>>, Exposure)>,
    pub(super) built: Arc<(Vec<T>, names::Names)>,
}

impl<T> Catalog<T> {
    pub(super) fn built_from(&self, from: &[(usize, Arc<Vec<T>>, Exposure)]) -> bool {
        self.from.len() == from.len()
            && self
                .from
                .iter()
                .zip(from)
                .all(|(a, b)| a.0 == b.0 && Arc::ptr_eq(&a.1, &b.1) && a.2 == b.2)
    }
}

