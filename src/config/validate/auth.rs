//! `auth:` of a remote server (docs/design.md, "Authorization"): `oauth`, with
//! its options or none, or `client_credentials` with its client. A secret
//! (`client_secret`, `refresh_token`) comes from `${env:}` only, so that a fleet
//! file can be committed and shown; a message never quotes an expanded value.

use super::super::expand::Text;
use super::super::keys::{Level, TOKEN_STORES};
use super::super::walk::{At, Entry, Validator};
use super::super::yaml::Node;
use super::super::{AuthSpec, ClientCredentialsSpec, OAuthSpec, TokenBackend};

impl Validator<'_> {
    /// `auth: oauth`, `auth: {oauth: {...}}` or `auth: {client_credentials: {...}}`.
    pub(super) fn auth(&mut self, entry: &Entry) -> Option<Box<AuthSpec>> {
        match entry.value {
            Node::Null => None,
            Node::Str(s) if s == "oauth" => Some(Box::new(AuthSpec::OAuth(OAuthSpec {
                offline_access: true,
                ..OAuthSpec::default()
            }))),
            Node::Str(s) if s == "client_credentials" => {
                self.error(
                    &entry.value_at,
                    "`client_credentials` needs its client: write \
                     `auth: {client_credentials: {client_id: ID, client_secret: ${env:NAME}}}`",
                );
                None
            }
            Node::Str(s) => {
                self.error(
                    &entry.value_at,
                    format!(
                        "unknown authorization `{s}`; write `auth: oauth` or \
                         `auth: {{client_credentials: {{...}}}}`"
                    ),
                );
                None
            }
            node => {
                let entries =
                    self.mapping(node, &entry.value_at, "`oauth` or a mapping with one of `oauth`, `client_credentials`")?;
                let mut found: Option<Box<AuthSpec>> = None;
                let mut kinds = 0;
                for e in &entries {
                    match e.key.as_str() {
                        "oauth" => {
                            kinds += 1;
                            found = self.oauth(e).map(|o| Box::new(AuthSpec::OAuth(o)));
                        }
                        "client_credentials" => {
                            kinds += 1;
                            found = self
                                .client_credentials(e)
                                .map(|c| Box::new(AuthSpec::ClientCredentials(c)));
                        }
                        _ => {
                            self.unknown_key(e, Level::Auth);
                        }
                    }
                }
                match kinds {
                    0 if entries.is_empty() => {
                        self.error(&entry.value_at, "`auth:` is empty; write `auth: oauth`");
                        None
                    }
                    0 | 1 => found,
                    _ => {
                        self.error(
                            &entry.value_at,
                            "`auth:` has both `oauth` and `client_credentials`; a server is \
                             authorized one way",
                        );
                        None
                    }
                }
            }
        }
    }

    fn oauth(&mut self, entry: &Entry) -> Option<OAuthSpec> {
        let mut spec = OAuthSpec {
            offline_access: true,
            ..OAuthSpec::default()
        };
        if matches!(entry.value, Node::Null) {
            return Some(spec);
        }
        let before = self.issue_count();
        let entries = self.mapping(entry.value, &entry.value_at, "a mapping of OAuth options")?;
        let mut client_id_at = None;
        let mut secret_at = None;
        for e in &entries {
            match e.key.as_str() {
                "scopes" => spec.scopes = self.scopes(e),
                "client_id" => {
                    client_id_at = Some(e.key_at.clone());
                    spec.client_id = self.client_id(e);
                }
                "client_secret" => {
                    secret_at = Some(e.key_at.clone());
                    spec.client_secret = self.secret(e);
                }
                "issuer" => spec.issuer = self.auth_url(e, false),
                "client_metadata_url" => spec.client_metadata_url = self.auth_url(e, true),
                "redirect_port" => spec.redirect_port = self.port(e),
                "refresh_token" => spec.refresh_token = self.secret(e),
                "offline_access" => match e.value {
                    Node::Bool { value, .. } => spec.offline_access = *value,
                    other => self.expected(&e.value_at, "a boolean (true or false)", other),
                },
                "store" => spec.store = self.token_store(e).unwrap_or_default(),
                _ => {
                    self.unknown_key(e, Level::OAuth);
                }
            }
        }
        if let (Some(at), None) = (&secret_at, &client_id_at) {
            self.error(
                at,
                "`client_secret` belongs to a pre-registered client: add its `client_id`",
            );
        }
        (self.issue_count() == before).then_some(spec)
    }

    fn client_credentials(&mut self, entry: &Entry) -> Option<ClientCredentialsSpec> {
        let before = self.issue_count();
        let entries = self.mapping(
            entry.value,
            &entry.value_at,
            "a mapping with `client_id` and `client_secret`",
        )?;
        let mut client_id = None;
        let mut client_secret = None;
        let mut scopes = Vec::new();
        let mut store = TokenBackend::File;
        for e in &entries {
            match e.key.as_str() {
                "client_id" => client_id = self.client_id(e),
                "client_secret" => client_secret = self.secret(e),
                "scopes" => scopes = self.scopes(e),
                "store" => store = self.token_store(e).unwrap_or_default(),
                _ => {
                    self.unknown_key(e, Level::ClientCredentials);
                }
            }
        }
        for (key, missing) in [
            ("client_id", client_id.is_none()),
            ("client_secret", client_secret.is_none()),
        ] {
            if missing && !entries.iter().any(|e| e.key == key) {
                self.error(
                    &entry.key_at,
                    format!("`client_credentials` needs `{key}`"),
                );
            }
        }
        if self.issue_count() > before {
            return None;
        }
        Some(ClientCredentialsSpec {
            client_id: client_id?,
            client_secret: client_secret?,
            scopes,
            store,
        })
    }

    /// Scopes: a sequence of names, or one string of names separated by spaces
    /// (as OAuth writes them).
    fn scopes(&mut self, entry: &Entry) -> Vec<String> {
        let mut out = Vec::new();
        let mut push = |this: &mut Self, at: &At, s: &str| {
            for scope in s.split(' ').filter(|s| !s.is_empty()) {
                // RFC 6749 §3.3: printable ASCII but space, `"` and `\`.
                if scope.bytes().all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b)) {
                    out.push(scope.to_owned());
                } else {
                    this.error(
                        at,
                        format!("`{scope}` is not a valid OAuth scope (printable ASCII but `\"` and `\\`)"),
                    );
                }
            }
        };
        match entry.value {
            Node::Null => {}
            Node::Seq(items) => {
                for (i, item) in items.iter().enumerate() {
                    match item.scalar_text() {
                        Some(s) if !s.trim().is_empty() => push(self, &entry.value_at.item(i), s),
                        _ => self.expected(&entry.value_at.item(i), "a scope name", item),
                    }
                }
            }
            node => match node.scalar_text() {
                Some(s) => push(self, &entry.value_at, s),
                None => self.expected(&entry.value_at, "a sequence of scope names", node),
            },
        }
        out
    }

    fn client_id(&mut self, entry: &Entry) -> Option<Text> {
        let text = self.text(entry.value, &entry.value_at)?;
        if text.value.is_empty() && !self.unchecked(&text) {
            self.error(&entry.value_at, "`client_id` must not be empty");
            return None;
        }
        Some(text)
    }

    /// A secret: `${env:NAME}` (with nothing else), so the fleet file holds
    /// none.
    fn secret(&mut self, entry: &Entry) -> Option<Text> {
        let key = entry.key.as_str();
        let Some(written) = entry.value.scalar_text() else {
            self.expected(&entry.value_at, "`${env:NAME}`", entry.value);
            return None;
        };
        let whole_env = written
            .strip_prefix("${env:")
            .and_then(|rest| rest.strip_suffix('}'))
            .is_some_and(|name| {
                !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            });
        if !whole_env {
            // Never quote it: it may be the secret itself.
            self.error(
                &entry.value_at,
                format!(
                    "`{key}` is a secret and must come from the environment: write \
                     `{key}: ${{env:NAME}}`"
                ),
            );
            return None;
        }
        let text = self.text(entry.value, &entry.value_at)?;
        if text.value.is_empty() && !self.unchecked(&text) {
            self.error(
                &entry.value_at,
                format!("`{key}` is empty once `{written}` is expanded"),
            );
            return None;
        }
        Some(text)
    }

    /// `issuer` (any `http(s)` URL with a host) or `client_metadata_url` (an
    /// `https://` URL with a path, as client ID metadata documents must be).
    fn auth_url(&mut self, entry: &Entry, metadata_document: bool) -> Option<String> {
        let key = entry.key.as_str();
        let Some(url) = entry.value.scalar_text() else {
            self.expected(&entry.value_at, "a URL", entry.value);
            return None;
        };
        if let Err(why) = super::check_url(url) {
            self.error(&entry.value_at, format!("`{url}` is not a valid URL for `{key}`: {why}"));
            return None;
        }
        if metadata_document {
            let path_ok = url::Url::parse(url).is_ok_and(|u| u.path() != "/" && !u.path().is_empty());
            if !url.starts_with("https://") || !path_ok {
                self.error(
                    &entry.value_at,
                    format!(
                        "`client_metadata_url` must be an `https://` URL with a path, \
                         where the client's metadata document is served; `{url}` is not"
                    ),
                );
                return None;
            }
        }
        Some(url.to_owned())
    }

    fn port(&mut self, entry: &Entry) -> Option<u16> {
        let Node::Number { raw } = entry.value else {
            self.expected(&entry.value_at, "a port number (1 to 65535)", entry.value);
            return None;
        };
        match raw.parse::<u16>() {
            Ok(port) if port > 0 => Some(port),
            _ => {
                self.error(
                    &entry.value_at,
                    format!("`{raw}` is not a port; `redirect_port` is a number from 1 to 65535"),
                );
                None
            }
        }
    }

    fn token_store(&mut self, entry: &Entry) -> Option<TokenBackend> {
        match entry.value.scalar_text() {
            Some("file") => Some(TokenBackend::File),
            Some("keyring") => Some(TokenBackend::Keyring),
            Some(other) => {
                self.error(
                    &entry.value_at,
                    format!(
                        "unknown token store `{other}`; use {}",
                        TOKEN_STORES.join(" or ")
                    ),
                );
                None
            }
            None => {
                self.expected(&entry.value_at, "file or keyring", entry.value);
                None
            }
        }
    }
}
