//! OAuth for remote servers (docs/design.md, "Authorization"): where tokens are
//! kept (`store`), the per-server keeper that the server's authority and its
//! HTTP client ask for a bearer token (`keeper`), and the login that obtains
//! them (`login`).

pub mod keeper;
pub mod login;
pub mod store;

pub use keeper::{AuthFailure, AuthFailureKind, Keeper};
pub use login::{LoginError, LoginOptions, LoginOutcome, login, logout};
pub use store::{ServerAuth, StoreError, StoreLock, TokenStore};
