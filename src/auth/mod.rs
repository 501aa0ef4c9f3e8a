//! OAuth for remote servers (docs/design.md, "Authorization"): where tokens are
//! kept (`store`), and the per-server keeper that the server's authority and its
//! HTTP client ask for a bearer token (`keeper`).

pub mod keeper;
pub mod store;

pub use keeper::{AuthFailure, AuthFailureKind, Keeper};
pub use store::{ServerAuth, StoreError, StoreLock, TokenStore};
