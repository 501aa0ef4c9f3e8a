//! `coordination:` at the top level: the etcd cluster that keeps the fleet's
//! authority when the fleet spans hosts (docs/design.md §19). Without it the
//! fleet runs on one host, as always.
//!
//! ```yaml
//! coordination:
//!   etcd: [http://10.0.0.1:2379, http://10.0.0.2:2379, http://10.0.0.3:2379]
//!   prefix: /mcpfleet/tools   # default: /mcpfleet/<fleet name>
//!   ttl: 10s                  # each host's lease, 2s to 120s
//!   lock_delay: 5s            # a standby waits this long after an owner's lease is gone
//!   tls:                      # with https:// endpoints only
//!     ca: etcd-ca.pem         # the CA that signed etcd's certificates
//!     cert: client.pem        # with key: a client certificate (etcd's --client-cert-auth)
//!     key: client-key.pem
//! ```

use std::time::Duration;

use super::super::keys::Level;
use super::super::spec::{CoordinationSpec, EtcdTls, Placement};
use super::super::walk::{Entry, Validator};
use super::super::yaml::Node;
use crate::config::Timeout;

/// The shortest and longest lease a host may take.
const MIN_TTL: Duration = Duration::from_secs(2);
const MAX_TTL: Duration = Duration::from_secs(120);

impl Validator<'_> {
    pub(super) fn coordination(&mut self, entry: &Entry) -> Option<CoordinationSpec> {
        let entries = self.mapping(entry.value, &entry.value_at, "a mapping")?;
        let mut spec = CoordinationSpec::default();
        let mut endpoints = None;
        for e in &entries {
            match e.key.as_str() {
                "etcd" => endpoints = Some(self.endpoints(e)),
                "prefix" => {
                    if let Some(prefix) = self.key_prefix(e) {
                        spec.prefix = Some(prefix);
                    }
                }
                "ttl" => {
                    if let Some(ttl) = self.bounded(e, MIN_TTL, MAX_TTL) {
                        spec.ttl = ttl;
                    }
                }
                "lock_delay" => {
                    if let Some(delay) = self.bounded(e, Duration::ZERO, MAX_TTL) {
                        spec.lock_delay = delay;
                    }
                }
                "tls" => spec.tls = self.etcd_tls(e),
                _ => {
                    self.unknown_key(e, Level::Coordination);
                }
            }
        }
        // TLS and `https://` go together: one scheme for every endpoint.
        if let (Some(list), Some(at)) = (&endpoints, entries.iter().find(|e| e.key == "etcd"))
            && let Err(message) = schemes_fit(list, entries.iter().any(|e| e.key == "tls"))
        {
            self.error(&at.value_at, message);
            return None;
        }
        match endpoints {
            Some(list) if !list.is_empty() => spec.etcd = list,
            Some(_) => return None,
            None => {
                self.error(
                    &entry.value_at,
                    "`coordination` needs `etcd`: the endpoints of the etcd cluster, e.g. [http://10.0.0.1:2379]",
                );
                return None;
            }
        }
        Some(spec)
    }

    /// `tls:` the CA of etcd's certificates and, together, a client
    /// certificate and its key: files, relative to the fleet file's folder.
    fn etcd_tls(&mut self, entry: &Entry) -> Option<EtcdTls> {
        let entries = self.mapping(entry.value, &entry.value_at, "a mapping")?;
        let (mut ca, mut cert, mut key) = (None, None, None);
        for e in &entries {
            match e.key.as_str() {
                "ca" => ca = self.pem_file(e),
                "cert" => cert = self.pem_file(e),
                "key" => key = self.pem_file(e),
                _ => {
                    self.unknown_key(e, Level::EtcdTls);
                }
            }
        }
        let given = |name: &str| entries.iter().any(|e| e.key == name);
        if given("cert") != given("key") {
            self.error(
                &entry.value_at,
                "`tls` needs `cert` and `key` together: the client certificate and its key",
            );
            return None;
        }
        if !given("ca") {
            self.error(
                &entry.value_at,
                "`tls` needs `ca`: the certificate (PEM) of the CA that signed etcd's certificates",
            );
            return None;
        }
        Some(EtcdTls {
            ca: ca?,
            identity: match (cert, key) {
                (Some(cert), Some(key)) => Some((cert, key)),
                _ if given("cert") => return None,
                _ => None,
            },
        })
    }

    /// A PEM file named by `entry`, relative to the fleet file's folder; one
    /// that cannot be read is an error here (not when a supervisor starts).
    pub(super) fn pem_file(&mut self, entry: &Entry) -> Option<std::path::PathBuf> {
        let text = self.text(entry.value, &entry.value_at)?;
        if text.value.is_empty() {
            self.error(&entry.value_at, format!("`{}` must name a file", entry.key));
            return None;
        }
        let path = self.base_dir.join(&text.value);
        if self.recorded {
            return Some(path);
        }
        match std::fs::read(&path) {
            Ok(bytes) if bytes.windows(11).any(|w| w == b"-----BEGIN ") => Some(path),
            Ok(_) => {
                self.error(
                    &entry.value_at,
                    format!("`{}` is not a PEM file (no `-----BEGIN`)", path.display()),
                );
                None
            }
            Err(e) => {
                self.error(&entry.value_at, format!("cannot read `{}`: {e}", path.display()));
                None
            }
        }
    }

    /// A server's `placement:`: `hosts` (names) and `standbys` (a count).
    pub(super) fn placement(&mut self, entry: &Entry) -> Placement {
        let mut placement = Placement::default();
        let Some(entries) = self.mapping(entry.value, &entry.value_at, "a mapping") else {
            return placement;
        };
        for e in &entries {
            match e.key.as_str() {
                "hosts" => {
                    let items: Vec<&Node> = match e.value {
                        Node::Seq(items) => items.iter().collect(),
                        single @ Node::Str(_) => vec![single],
                        other => {
                            self.expected(&e.value_at, "a sequence of host names", other);
                            continue;
                        }
                    };
                    for (i, item) in items.into_iter().enumerate() {
                        let at = match e.value {
                            Node::Seq(_) => e.value_at.item(i),
                            _ => e.value_at.clone(),
                        };
                        match item.scalar_text() {
                            Some(name) if is_host(name) => placement.hosts.push(name.to_owned()),
                            Some(name) => self.error(
                                &at,
                                format!("`{name}` is not a host name: letters, digits, `.`, `_` and `-`, at most 253"),
                            ),
                            None => self.expected(&at, "a host name", item),
                        }
                    }
                }
                "standbys" => match e.value {
                    Node::Number { raw } if raw.parse::<u32>().is_ok_and(|n| n <= 64) => {
                        placement.standbys = raw.parse().ok();
                    }
                    Node::Number { raw } => self.error(
                        &e.value_at,
                        format!("`standbys` must be a whole number from 0 to 64, not `{raw}`"),
                    ),
                    other => self.expected(&e.value_at, "a whole number of standbys from 0 to 64", other),
                },
                _ => {
                    self.unknown_key(e, Level::Placement);
                }
            }
        }
        placement
    }

    /// `etcd:` a sequence of `http://HOST:PORT` (or `HOST:PORT`).
    fn endpoints(&mut self, entry: &Entry) -> Vec<String> {
        let items: Vec<&Node> = match entry.value {
            Node::Seq(items) => items.iter().collect(),
            single @ (Node::Str(_) | Node::Number { .. }) => vec![single],
            other => {
                self.expected(&entry.value_at, "a sequence of etcd endpoints", other);
                return Vec::new();
            }
        };
        if items.is_empty() {
            self.error(
                &entry.value_at,
                "`etcd` is empty; name at least one endpoint, e.g. http://127.0.0.1:2379",
            );
        }
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            let at = match entry.value {
                Node::Seq(_) => entry.value_at.item(i),
                _ => entry.value_at.clone(),
            };
            let Some(text) = item.scalar_text() else {
                self.expected(&at, "an endpoint such as http://127.0.0.1:2379", item);
                continue;
            };
            match endpoint(text) {
                Ok(url) => out.push(url),
                Err(message) => self.error(&at, message),
            }
        }
        out
    }

    /// `prefix:` an absolute key prefix, `/` and `[A-Za-z0-9._-]` only.
    fn key_prefix(&mut self, entry: &Entry) -> Option<String> {
        let Some(text) = entry.value.scalar_text() else {
            self.expected(&entry.value_at, "a key prefix such as /mcpfleet/tools", entry.value);
            return None;
        };
        let trimmed = text.trim_end_matches('/');
        let fine = trimmed.starts_with('/')
            && trimmed.len() > 1
            && trimmed.len() <= 200
            && !trimmed.contains("//")
            && trimmed
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b));
        if !fine {
            self.error(
                &entry.value_at,
                format!("`{text}` is not a key prefix: write an absolute path of letters, digits, `.`, `_` and `-`, such as /mcpfleet/tools"),
            );
            return None;
        }
        Some(trimmed.to_owned())
    }

    /// A duration from `min` to `max`.
    fn bounded(&mut self, entry: &Entry, min: Duration, max: Duration) -> Option<Duration> {
        let duration = match entry.value {
            // `lock_delay: 0` (or `0s`) switches the delay off.
            Node::Number { raw } | Node::Str(raw)
                if min.is_zero()
                    && (raw == "0" || matches!(
                        crate::config::duration::parse(raw),
                        Err(crate::config::DurationError::Zero(_))
                    )) =>
            {
                return Some(Duration::ZERO);
            }
            _ => match self.duration(entry, false)? {
                Timeout::After(d) => d,
                Timeout::Never => return None,
            },
        };
        if duration < min || duration > max {
            self.error(
                &entry.value_at,
                format!(
                    "`{}` must be from {} to {}",
                    entry.key,
                    Timeout::After(min),
                    Timeout::After(max)
                ),
            );
            return None;
        }
        Some(duration)
    }
}

/// The environment variable that gives a host its own etcd endpoints
/// (comma-separated), in place of `coordination.etcd`: a local proxy, or the
/// member next to it.
pub const ETCD_ENV: &str = "MCPFLEET_ETCD";

impl CoordinationSpec {
    /// The endpoints this host uses: `$MCPFLEET_ETCD`, else `etcd`.
    pub fn endpoints_here(&self) -> Result<Vec<String>, String> {
        match std::env::var(ETCD_ENV) {
            Ok(list) if !list.trim().is_empty() => {
                let list: Vec<String> = list
                    .split(',')
                    .map(|e| endpoint(e.trim()))
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("${ETCD_ENV}: {e}"))?;
                schemes_fit(&list, self.tls.is_some()).map_err(|e| format!("${ETCD_ENV}: {e}"))?;
                Ok(list)
            }
            _ => Ok(self.etcd.clone()),
        }
    }
}

/// A host's name as `$MCPFLEET_HOST` or the host name gives it.
pub(crate) fn is_host(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// Whether `endpoints` are all `https://` with `tls:`, or all `http://`
/// without.
fn schemes_fit(endpoints: &[String], tls: bool) -> Result<(), String> {
    let https = endpoints.iter().filter(|e| e.starts_with("https://")).count();
    match (tls, https) {
        (true, n) if n == endpoints.len() => Ok(()),
        (false, 0) => Ok(()),
        (false, _) => Err(
            "`https://` endpoints need `tls: {ca: FILE}`: the CA that signed etcd's certificates".into(),
        ),
        (true, _) => Err("with `tls:`, every etcd endpoint must be `https://`".into()),
    }
}

/// An etcd endpoint as the client takes it: `http://HOST:PORT` or
/// `https://HOST:PORT`; a bare `HOST:PORT` gets `http://`.
pub(crate) fn endpoint(text: &str) -> Result<String, String> {
    let example = "write e.g. http://127.0.0.1:2379";
    let (scheme, rest) = match text.strip_prefix("https://") {
        Some(rest) => ("https", rest),
        None => ("http", text.strip_prefix("http://").unwrap_or(text)),
    };
    let (host, port) = rest
        .trim_end_matches('/')
        .rsplit_once(':')
        .ok_or_else(|| format!("`{text}` has no port; {example}"))?;
    let host_fine = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-[]:".contains(&b));
    if !host_fine || rest.contains('/') && !rest.ends_with('/') {
        return Err(format!("`{text}` is not an etcd endpoint; {example}"));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(format!("{scheme}://{host}:{p}")),
        _ => Err(format!("`{text}` has no valid port; {example}")),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::validate::coordination::{endpoint, schemes_fit};

    #[test]
    fn endpoints_are_http_with_a_port() {
        assert_eq!(endpoint("127.0.0.1:2379").unwrap(), "http://127.0.0.1:2379");
        assert_eq!(endpoint("http://etcd-0:2379/").unwrap(), "http://etcd-0:2379");
        assert_eq!(endpoint("http://[::1]:2379").unwrap(), "http://[::1]:2379");
        for bad in ["etcd", "http://etcd", "http://etcd:0", "http://e:2379/v3/x", "a b:1"] {
            assert!(endpoint(bad).is_err(), "{bad}");
        }
        assert_eq!(endpoint("https://etcd-0:2379").unwrap(), "https://etcd-0:2379");
    }

    #[test]
    fn tls_and_https_go_together() {
        let https = vec!["https://a:1".to_owned(), "https://b:1".to_owned()];
        let mixed = vec!["https://a:1".to_owned(), "http://b:1".to_owned()];
        assert!(schemes_fit(&https, true).is_ok());
        assert!(schemes_fit(&https, false).unwrap_err().contains("need `tls"));
        assert!(schemes_fit(&mixed, true).unwrap_err().contains("every etcd endpoint"));
        assert!(schemes_fit(&mixed[1..], false).is_ok());
    }
}
