//! The YAML layer: text to a [`Node`] tree, and a node back to its line and column.
//!
//! [`parse`] reads the document into a tree of its own that keeps what
//! `serde_yaml::Value` would lose (duplicate keys, the text of numbers as
//! written). serde_yaml keeps positions private, so [`locate`] finds a node's
//! line and column the only way the library allows: by deserializing the
//! document again and failing on purpose at the node. This module knows YAML,
//! not the fleet format.
//!
//! `node.rs` holds the tree; `build.rs` how it is built. `guards.rs` holds what bounds
//! a hostile or mistaken file (node budget, flow nesting, libyaml panics);
//! `position.rs` turns a path of steps, a byte offset or a serde_yaml error into
//! a line and column, and says why it re-deserializes instead of keeping spans.

mod build;
mod guards;
mod node;
mod position;

pub(crate) use build::parse;
pub(crate) use node::{Node, Step, line_column};
pub(crate) use position::locate;
