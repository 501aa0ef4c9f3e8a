//! The keys of the gateway (docs/design.md §14): `gateway:` at the top level, and
//! each server's `prefix:` and `tools: {allow, deny}`.

use super::super::keys::Level;
use super::super::walk::{Entry, Validator};
use super::super::yaml::Node;
use super::super::spec::{ExposeSpec, GatewaySpec, GatewayTls, MAX_CAP, MetricsSpec};

/// The longest `prefix:`: room is left for `__` and the tool's own name within
/// the 64 characters clients accept.
const MAX_PREFIX: usize = 32;

impl Validator<'_> {
    pub(super) fn gateway(&mut self, entry: &Entry) -> GatewaySpec {
        let mut spec = GatewaySpec::default();
        if matches!(entry.value, Node::Null) {
            return spec;
        }
        let Some(entries) = self.mapping(entry.value, &entry.value_at, "a mapping") else {
            return spec;
        };
        for e in &entries {
            match e.key.as_str() {
                "listen" => spec.listen = self.listen(e),
                "token" => {
                    spec.token = self.text(e.value, &e.value_at);
                    if spec
                        .token
                        .as_ref()
                        .is_some_and(|t| t.value.len() < 16 && !self.unchecked(t))
                    {
                        self.error(
                            &e.value_at,
                            "`token` must be at least 16 characters (use ${env:NAME} to keep it out of the file)",
                        );
                    }
                }
                "origins" => spec.origins = self.strings(e, "origins"),
                "page_size" => spec.page_size = self.page_size(e),
                "meta" => spec.meta = self.boolean(e).unwrap_or(false),
                "max_connections" => spec.max_connections = self.cap(e),
                "max_sessions" => spec.max_sessions = self.cap(e),
                "tls" => spec.tls = self.gateway_tls(e),
                _ => {
                    self.unknown_key(e, Level::Gateway);
                }
            }
        }
        spec
    }

    /// `tls:` of the gateway: `cert` and `key` (both), `ca` (optional); PEM
    /// files relative to the fleet file's folder.
    fn gateway_tls(&mut self, entry: &Entry) -> Option<GatewayTls> {
        let entries = self.mapping(entry.value, &entry.value_at, "a mapping")?;
        let (mut cert, mut key, mut ca) = (None, None, None);
        for e in &entries {
            match e.key.as_str() {
                "cert" => cert = self.pem_file(e),
                "key" => key = self.pem_file(e),
                "ca" => ca = self.pem_file(e),
                _ => {
                    self.unknown_key(e, Level::GatewayTls);
                }
            }
        }
        let given = |name: &str| entries.iter().any(|e| e.key == name);
        if !given("cert") || !given("key") {
            self.error(
                &entry.value_at,
                "`tls` needs `cert` and `key`: the certificate the gateway serves HTTPS with, and its key",
            );
            return None;
        }
        if given("ca") && ca.is_none() {
            return None;
        }
        Some(GatewayTls {
            cert: cert?,
            key: key?,
            ca,
        })
    }

    /// `metrics:` at the top level (docs/design.md §17).
    pub(super) fn metrics(&mut self, entry: &Entry) -> MetricsSpec {
        let mut spec = MetricsSpec::default();
        if matches!(entry.value, Node::Null) {
            return spec;
        }
        let Some(entries) = self.mapping(entry.value, &entry.value_at, "a mapping") else {
            return spec;
        };
        for e in &entries {
            match e.key.as_str() {
                "listen" => spec.listen = self.listen(e),
                "max_connections" => spec.max_connections = self.cap(e),
                _ => {
                    self.unknown_key(e, Level::Metrics);
                }
            }
        }
        spec
    }

    fn listen(&mut self, entry: &Entry) -> Option<std::net::SocketAddr> {
        let text = self.text(entry.value, &entry.value_at)?;
        match text.value.parse() {
            Ok(addr) => Some(addr),
            Err(_) if self.unchecked(&text) => None,
            Err(_) => {
                self.error(
                    &entry.value_at,
                    format!(
                        "`{}` is not an address and port to listen on, like 127.0.0.1:7077 or [::1]:7077",
                        text.value
                    ),
                );
                None
            }
        }
    }

    fn page_size(&mut self, entry: &Entry) -> Option<usize> {
        let raw = match entry.value {
            Node::Number { raw } => raw,
            other => {
                self.expected(&entry.value_at, "a whole number from 1 to 10000", other);
                return None;
            }
        };
        match raw.parse::<usize>() {
            Ok(n) if (1..=10_000).contains(&n) => Some(n),
            _ => {
                self.error(
                    &entry.value_at,
                    format!("`page_size` must be a whole number from 1 to 10000, not `{raw}`"),
                );
                None
            }
        }
    }

    /// A cap on what a door's peers hold at once (`max_connections`,
    /// `max_sessions`): a whole number from 1 to [`MAX_CAP`].
    fn cap(&mut self, entry: &Entry) -> Option<usize> {
        let raw = match entry.value {
            Node::Number { raw } => raw,
            other => {
                self.expected(
                    &entry.value_at,
                    &format!("a whole number from 1 to {MAX_CAP}"),
                    other,
                );
                return None;
            }
        };
        match raw.parse::<usize>() {
            Ok(n) if (1..=MAX_CAP).contains(&n) => Some(n),
            _ => {
                self.error(
                    &entry.value_at,
                    format!(
                        "`{}` must be a whole number from 1 to {MAX_CAP}, not `{raw}`",
                        entry.key
                    ),
                );
                None
            }
        }
    }

    /// A sequence of strings (globs, origins), taken as written.
    fn strings(&mut self, entry: &Entry, key: &str) -> Vec<String> {
        let items = match entry.value {
            Node::Null => return Vec::new(),
            Node::Seq(items) => items,
            other => {
                self.expected(
                    &entry.value_at,
                    &format!("a sequence of strings for `{key}`"),
                    other,
                );
                return Vec::new();
            }
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            match item.scalar_text() {
                Some(s) if !s.is_empty() => out.push(s.to_owned()),
                _ => self.expected(&entry.value_at.item(i), "a non-empty string", item),
            }
        }
        out
    }

    /// `prefix:` of a server: `[A-Za-z0-9_-]`, at most [`MAX_PREFIX`], may be empty.
    pub(super) fn prefix(&mut self, entry: &Entry, expose: &mut ExposeSpec) {
        let Some(prefix) = entry.value.scalar_text() else {
            if matches!(entry.value, Node::Null) {
                expose.prefix = Some(String::new());
            } else {
                self.expected(&entry.value_at, "a string", entry.value);
            }
            return;
        };
        let valid = prefix.len() <= MAX_PREFIX
            && prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if valid {
            expose.prefix = Some(prefix.to_owned());
        } else {
            self.error(
                &entry.value_at,
                format!(
                    "invalid prefix `{prefix}`: use at most {MAX_PREFIX} letters, digits, `_` and `-` \
                     (tool names that MCP clients accept)"
                ),
            );
        }
    }

    /// `tools: {allow: [GLOB...], deny: [GLOB...]}` of a server.
    pub(super) fn tools(&mut self, entry: &Entry, expose: &mut ExposeSpec) {
        if matches!(entry.value, Node::Null) {
            return;
        }
        let Some(entries) = self.mapping(entry.value, &entry.value_at, "a mapping") else {
            return;
        };
        for e in &entries {
            match e.key.as_str() {
                "allow" => expose.allow = self.strings(e, "allow"),
                "deny" => expose.deny = self.strings(e, "deny"),
                _ => {
                    self.unknown_key(e, Level::Tools);
                }
            }
        }
    }
}
