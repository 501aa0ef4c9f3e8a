//! One server of the fleet as the gateway reaches and shows it, and which
//! servers a client session sees.

use std::sync::Arc;

use crate::lifecycle::authority::Handle;

/// How a server's tools and prompts are shown: the fleet file's `prefix:` and
/// `tools: {allow, deny}`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Exposure {
    pub prefix: String,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

/// One server of the fleet, as the gateway reaches it.
#[derive(Clone)]
pub(crate) struct Member {
    pub handle: Handle,
    pub exposure: Exposure,
    /// A disabled server is started only when a client calls it.
    pub enabled: bool,
}

/// The servers a session sees, by index; all when `None`.
pub(crate) type Scope = Option<Arc<[usize]>>;
