//! Which era of MCP a server speaks, found by a probe of our own before the
//! session is set up (docs/design.md §11, "Eras").
//!
//! A server of the modern era (2026-07-28 and later) has no `initialize`: it
//! answers `server/discover`, and every request carries its own `_meta`. A server
//! of the legacy era has only `initialize`. Before the session, mcpfleet sends one
//! `server/discover` with modern `_meta` and waits at most the probe's bound
//! ([`probe_bound`]):
//!
//! - a `DiscoverResult` naming a modern version we know, and no legacy version
//!   we know: modern, at that version;
//! - the error -32022 (unsupported protocol version) whose `data.supported` names
//!   a modern version we know, and no legacy one: modern, at that version;
//! - a server that names versions of both eras (a dual-era server) is spoken
//!   to in the legacy era: there the gateway carries its requests of its client
//!   (sampling, elicitation, roots), its log messages and resource subscriptions
//!   to the gateway's clients, which the modern era turns into input-required
//!   results, per-request log levels and listen streams (docs/design.md §11,
//!   "Eras");
//! - anything else (another error, a success that is not a `DiscoverResult`, an
//!   HTTP refusal without a modern error, or nothing within the bound): legacy,
//!   and the session opens with `initialize` as before, on the same pipe or URL.
//!
//! rmcp then sets the session up in the era found (its `Discover` or `Initialize`
//! lifecycle); its own `Auto` mode is not used, since it waits a fixed 10 s and
//! fails on a success that is not a `DiscoverResult`.

use std::time::Duration;

use rmcp::model::{DiscoverResult, InitializeRequestParams, ProtocolVersion};
use serde::Deserialize;
use serde_json::{Value, json};

/// The era a session speaks, as its probe found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Era {
    /// `initialize`, then requests within the session.
    Legacy,
    /// `server/discover`, then requests that each carry this version in `_meta`.
    Modern(ProtocolVersion),
}

impl Era {
    /// As reported: `legacy`, or the modern version (`2026-07-28`).
    pub(crate) fn label(&self) -> String {
        match self {
            Era::Legacy => "legacy".to_owned(),
            Era::Modern(version) => version.as_str().to_owned(),
        }
    }
}

/// How long the probe waits for an answer at most: a legacy server that never
/// answers a method it does not know costs a start no more than this.
pub(crate) const PROBE_SILENCE: Duration = Duration::from_secs(1);

/// The probe's bound under a connect timeout of `connect` (`None`: no timeout):
/// [`PROBE_SILENCE`], and never more than a quarter of the connect timeout, so
/// that the `initialize` that follows a silent probe keeps most of it.
pub(crate) fn probe_bound(connect: Option<Duration>) -> Duration {
    connect.map_or(PROBE_SILENCE, |c| PROBE_SILENCE.min(c / 4))
}

/// The JSON-RPC error code of an unsupported protocol version.
const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// The modern versions we speak, newest first.
fn modern_versions() -> impl Iterator<Item = &'static ProtocolVersion> {
    ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .rev()
        .filter(|v| !v.has_initialize())
}

/// The newest modern version we speak among `offered`, when `offered` names no
/// legacy version we speak (a server of both eras is spoken to in the legacy
/// era).
fn pick(offered: &[ProtocolVersion]) -> Option<ProtocolVersion> {
    let legacy_too = ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .any(|v| v.has_initialize() && offered.contains(v));
    if legacy_too {
        return None;
    }
    modern_versions().find(|v| offered.contains(v)).cloned()
}

/// The version the probe asks for: the newest modern one we speak.
pub(crate) fn preferred() -> ProtocolVersion {
    modern_versions()
        .next()
        .cloned()
        .unwrap_or(ProtocolVersion::NO_INITIALIZE)
}

/// The `params` of the probe: modern `_meta` with our version, capabilities and
/// name.
pub(crate) fn discover_params(info: &InitializeRequestParams) -> Value {
    json!({
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": preferred().as_str(),
            "io.modelcontextprotocol/clientCapabilities": info.capabilities,
            "io.modelcontextprotocol/clientInfo": info.client_info,
        }
    })
}

/// The `_meta` every request of a session of the modern era at `version`
/// carries (rmcp adds it to its own requests): the probe's, naming `version`.
pub(crate) fn request_meta(
    info: &InitializeRequestParams,
    version: &ProtocolVersion,
) -> serde_json::Map<String, Value> {
    let mut meta = match discover_params(info)["_meta"].take() {
        Value::Object(meta) => meta,
        _ => serde_json::Map::new(),
    };
    meta.insert(
        "io.modelcontextprotocol/protocolVersion".into(),
        version.as_str().into(),
    );
    meta
}

/// What came back to the probe.
#[derive(Debug)]
pub(crate) enum Reply {
    /// A `result`, as JSON text.
    Result(String),
    /// An `error` object, as JSON text.
    Error(String),
    /// Nothing usable: no answer within the bound, the stream ended, or an answer
    /// that is neither.
    Nothing,
}

#[derive(Deserialize)]
struct ErrorObject {
    code: i64,
    #[serde(default)]
    data: Option<ErrorData>,
}

#[derive(Deserialize)]
struct ErrorData {
    #[serde(default)]
    supported: Vec<Value>,
}

/// The era `reply` shows (see the module comment).
pub(crate) fn classify(reply: &Reply) -> Era {
    let modern = match reply {
        Reply::Result(text) => serde_json::from_str::<DiscoverResult>(text)
            .ok()
            .and_then(|r| pick(&r.supported_versions)),
        Reply::Error(text) => serde_json::from_str::<ErrorObject>(text)
            .ok()
            .filter(|e| e.code == UNSUPPORTED_PROTOCOL_VERSION)
            .and_then(|e| e.data)
            .and_then(|d| {
                let offered: Vec<ProtocolVersion> = d
                    .supported
                    .into_iter()
                    .filter_map(|v| serde_json::from_value(v).ok())
                    .collect();
                pick(&offered)
            }),
        Reply::Nothing => None,
    };
    modern.map_or(Era::Legacy, Era::Modern)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn era(reply: Reply) -> Era {
        classify(&reply)
    }

    const DISCOVERED: &str = r#"{"resultType":"complete","supportedVersions":["2026-07-28","2025-11-25"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"public"}"#;

    #[test]
    fn a_discover_result_naming_only_a_modern_version_is_modern_at_it() {
        let only_modern = DISCOVERED.replace(r#","2025-11-25""#, "");
        assert_eq!(
            era(Reply::Result(only_modern)),
            Era::Modern(ProtocolVersion::V_2026_07_28)
        );
    }

    #[test]
    fn a_server_of_both_eras_is_spoken_to_in_the_legacy_era() {
        assert_eq!(era(Reply::Result(DISCOVERED.into())), Era::Legacy);
        let error = r#"{"code":-32022,"message":"unsupported","data":{"supported":["2026-07-28","2025-06-18"]}}"#;
        assert_eq!(era(Reply::Error(error.into())), Era::Legacy);
    }

    #[test]
    fn a_discover_result_naming_only_legacy_versions_is_legacy() {
        let only_legacy = DISCOVERED.replace(r#""2026-07-28","#, "");
        assert_eq!(era(Reply::Result(only_legacy)), Era::Legacy);
    }

    #[test]
    fn a_success_that_is_not_a_discover_result_is_legacy() {
        assert_eq!(era(Reply::Result("{}".into())), Era::Legacy);
        assert_eq!(era(Reply::Result("[1]".into())), Era::Legacy);
    }

    #[test]
    fn an_unsupported_version_error_naming_a_modern_version_is_modern() {
        let error = r#"{"code":-32022,"message":"unsupported","data":{"supported":["2026-07-28"],"requested":"2099-01-01"}}"#;
        assert_eq!(
            era(Reply::Error(error.into())),
            Era::Modern(ProtocolVersion::V_2026_07_28)
        );
    }

    #[test]
    fn other_errors_and_silence_are_legacy() {
        for error in [
            r#"{"code":-32601,"message":"method not found"}"#,
            r#"{"code":-32602,"message":"invalid params"}"#,
            r#"{"code":-32022,"message":"unsupported","data":{"supported":["2025-11-25"]}}"#,
            r#"{"code":-32022,"message":"unsupported"}"#,
            r#"{"code":-32022,"message":"unsupported","data":{"supported":[1, null]}}"#,
            "not json",
        ] {
            assert_eq!(era(Reply::Error(error.into())), Era::Legacy, "{error}");
        }
        assert_eq!(era(Reply::Nothing), Era::Legacy);
    }

    #[test]
    fn the_bound_is_a_second_and_at_most_a_quarter_of_the_connect_timeout() {
        assert_eq!(probe_bound(None), PROBE_SILENCE);
        assert_eq!(probe_bound(Some(Duration::from_secs(10))), PROBE_SILENCE);
        assert_eq!(
            probe_bound(Some(Duration::from_millis(800))),
            Duration::from_millis(200)
        );
    }

    #[test]
    fn the_probe_asks_for_the_newest_modern_version_with_our_meta() {
        let info = InitializeRequestParams::new(
            Default::default(),
            rmcp::model::Implementation::new("mcpfleet", "1"),
        );
        let params = discover_params(&info);
        let meta = &params["_meta"];
        assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
        assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "mcpfleet");
        assert!(meta["io.modelcontextprotocol/clientCapabilities"].is_object());
    }
}
