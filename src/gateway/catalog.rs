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
    fn slot(lists: &mut Lists) -> &mut Known<Self>;
    fn fetch(
        peer: &Peer<RoleClient>,
    ) -> impl Future<Output = Result<Vec<Self>, rmcp::service::ServiceError>> + Send;
}

macro_rules! listing {
    ($t:ty, $field:ident, $cap:ident, $fetch:ident) => {
        impl Listing for $t {
            fn offered(caps: &rmcp::model::ServerCapabilities) -> bool {
                caps.$cap.is_some()
            }
            fn slot(lists: &mut Lists) -> &mut Known<Self> {
                &mut lists.$field
            }
            fn fetch(
                peer: &Peer<RoleClient>,
            ) -> impl Future<Output = Result<Vec<Self>, rmcp::service::ServiceError>> + Send {
                peer.$fetch()
            }
        }
    };
}

listing!(Tool, tools, tools, list_all_tools);
listing!(Prompt, prompts, prompts, list_all_prompts);
listing!(Resource, resources, resources, list_all_resources);
listing!(
    ResourceTemplate,
    templates,
    resources,
    list_all_resource_templates
);

/// An item the gateway shows under a name of its own.
pub(super) trait Named {
    fn name(&self) -> &str;
    fn renamed(&self, name: String) -> Self;
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

