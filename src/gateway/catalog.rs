//! What the gateway knows of what each server offers (its tools, prompts,
//! resources and templates, per generation), and the catalogs built from it:
//! every server's items renamed and filtered, and how their names route back.

use std::sync::Arc;

use rmcp::model::{Prompt, Resource, ResourceTemplate, Tool};
use rmcp::service::{Peer, RoleClient};

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
    pub(super) tools: Known<Tool>,
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
        peer: &Peer<RoleClient>,
    ) -> impl Future<Output = Result<Vec<Self>, rmcp::service::ServiceError>> + Send;
}

/// One list of one server, as learned from its running generation.
pub(super) enum Learnt {
    Tools(Known<Tool>),
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
                peer: &Peer<RoleClient>,
            ) -> impl Future<Output = Result<Vec<Self>, rmcp::service::ServiceError>> + Send {
                peer.$fetch()
            }
        }
    };
}

listing!(Tool, tools, Tools, tools, list_all_tools);
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
    pub(super) tools: Option<Catalog<Tool>>,
    pub(super) prompts: Option<Catalog<Prompt>>,
}

/// A catalog just built.
pub(super) enum Built {
    Tools(Catalog<Tool>),
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

impl Named for Tool {
    fn name(&self) -> &str {
        &self.name
    }
    fn renamed(&self, name: String) -> Tool {
        let mut tool = self.clone();
        tool.name = name.into();
        tool
    }
    fn kept(catalogs: &Catalogs) -> Option<&Catalog<Tool>> {
        catalogs.tools.as_ref()
    }
    fn built(catalog: Catalog<Tool>) -> Built {
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

