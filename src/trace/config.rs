//! What the `OTEL_*` variables of the supervisor's environment ask for, read once
//! when the supervisor starts (the OpenTelemetry SDK environment variables and the
//! OTLP exporter's, as far as this exporter goes; docs/design.md §18).
//!
//! Pure: the environment is a lookup function, so every rule is unit-tested here.

use std::time::Duration;

use url::Url;

/// The OTLP exporter's default timeout of one export.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The resource's `service.name` unless `OTEL_SERVICE_NAME` (or
/// `OTEL_RESOURCE_ATTRIBUTES`) names one.
pub(crate) const DEFAULT_SERVICE: &str = "mcpfleet";

/// How spans are put on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// `http/protobuf`: the specification's default.
    Protobuf,
    /// `http/json`.
    Json,
}

impl Protocol {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Protocol::Protobuf => "http/protobuf",
            Protocol::Json => "http/json",
        }
    }

    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Protocol::Protobuf => "application/x-protobuf",
            Protocol::Json => "application/json",
        }
    }
}

/// Where and how to export.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Config {
    pub endpoint: Url,
    pub protocol: Protocol,
    /// Sent with every export (`OTEL_EXPORTER_OTLP_HEADERS`). Values may be
    /// secrets: never logged.
    pub headers: Vec<(String, String)>,
    /// The bound of one export, the connection included.
    pub timeout: Duration,
    /// The resource's attributes, `service.name` first.
    pub resource: Vec<(String, String)>,
}

/// What the environment asks for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Setup {
    /// No endpoint (or exporting is switched off): nothing is started.
    Off,
    /// An endpoint was given but cannot be served; the reason, for the log.
    Refused(String),
    /// Export, after logging the warnings (settings ignored, with why).
    On(Config, Vec<String>),
}

/// Reads the setup from `var` (the environment, in the supervisor). A variable
/// set to the empty string counts as unset, as the specification says.
pub(crate) fn from_env(var: impl Fn(&str) -> Option<String>) -> Setup {
    let var = |name: &str| {
        var(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    // The traces' own variable wins over the generic one.
    let either = |name: &str| {
        var(&format!("OTEL_EXPORTER_OTLP_TRACES_{name}"))
            .or_else(|| var(&format!("OTEL_EXPORTER_OTLP_{name}")))
    };

    let (endpoint, given) = match (
        var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        var("OTEL_EXPORTER_OTLP_ENDPOINT"),
    ) {
        (Some(url), _) => (traces_url(&url), "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        (None, Some(base)) => (
            Url::parse(&base).map(|u| with_traces_path(&u)),
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ),
        (None, None) => return Setup::Off,
    };
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Setup::Off;
    }
    if let Some(exporters) = var("OTEL_TRACES_EXPORTER") {
        let names: Vec<&str> = exporters.split(',').map(str::trim).collect();
        if names == ["none"] {
            return Setup::Off;
        }
        if !names.contains(&"otlp") {
            return Setup::Refused(format!(
                "OTEL_TRACES_EXPORTER={exporters}: mcpfleet exports traces only over OTLP (`otlp`, or `none`)"
            ));
        }
    }
    let endpoint = match endpoint {
        Ok(url) => url,
        Err(e) => return Setup::Refused(format!("{given} is not a URL: {e}")),
    };
    match endpoint.scheme() {
        "http" => {}
        "https" => {
            return Setup::Refused(format!(
                "{given} is an https URL, but mcpfleet exports spans over plain HTTP only: export to an http:// endpoint \
                 (a collector on this host or a sidecar that forwards over TLS)"
            ));
        }
        other => {
            return Setup::Refused(format!(
                "{given} has the scheme `{other}`; OTLP over HTTP needs http://"
            ));
        }
    }
    let protocol = match either("PROTOCOL").as_deref() {
        None | Some("http/protobuf") => Protocol::Protobuf,
        Some("http/json") => Protocol::Json,
        Some("grpc") => {
            return Setup::Refused(
                "OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported: mcpfleet exports over \
                 OTLP/HTTP only; set it to http/protobuf (a collector's port 4318) or http/json"
                    .into(),
            );
        }
        Some(other) => {
            return Setup::Refused(format!(
                "OTEL_EXPORTER_OTLP_PROTOCOL={other} is not a protocol mcpfleet knows \
                 (http/protobuf or http/json)"
            ));
        }
    };

    let mut warnings = Vec::new();
    let headers = match either("HEADERS") {
        Some(text) => pairs(&text, "OTEL_EXPORTER_OTLP_HEADERS", &mut warnings)
            .into_iter()
            .filter(|(k, _)| {
                let valid = http::HeaderName::from_bytes(k.as_bytes()).is_ok();
                if !valid {
                    warnings.push(format!(
                        "OTEL_EXPORTER_OTLP_HEADERS: `{k}` is not a header name; left out"
                    ));
                }
                valid
            })
            .collect(),
        None => Vec::new(),
    };
    let timeout = match either("TIMEOUT") {
        None => DEFAULT_TIMEOUT,
        Some(ms) => match ms.parse::<u64>() {
            Ok(ms) if ms > 0 => Duration::from_millis(ms),
            _ => {
                warnings.push(format!(
                    "OTEL_EXPORTER_OTLP_TIMEOUT={ms} is not a positive number of milliseconds; \
                     using {} ms",
                    DEFAULT_TIMEOUT.as_millis()
                ));
                DEFAULT_TIMEOUT
            }
        },
    };
    if let Some(c) = either("COMPRESSION").filter(|c| c != "none") {
        warnings.push(format!(
            "OTEL_EXPORTER_OTLP_COMPRESSION={c} is not supported; spans are sent uncompressed"
        ));
    }

    let mut resource = match var("OTEL_RESOURCE_ATTRIBUTES") {
        Some(text) => pairs(&text, "OTEL_RESOURCE_ATTRIBUTES", &mut warnings),
        None => Vec::new(),
    };
    let service = var("OTEL_SERVICE_NAME")
        .or_else(|| {
            resource
                .iter()
                .find(|(k, _)| k == "service.name")
                .map(|(_, v)| v.clone())
        })
        .unwrap_or_else(|| DEFAULT_SERVICE.to_owned());
    resource.retain(|(k, _)| k != "service.name");
    resource.insert(0, ("service.name".to_owned(), service));
    Setup::On(
        Config {
            endpoint,
            protocol,
            headers,
            timeout,
            resource,
        },
        warnings,
    )
}

/// The traces' own endpoint is used as given; only a URL with no path at all gets
/// the root path (which parsing already gives it).
fn traces_url(text: &str) -> Result<Url, url::ParseError> {
    Url::parse(text)
}

/// The generic endpoint is a base: `v1/traces` is appended to its path.
fn with_traces_path(base: &Url) -> Url {
    let mut url = base.clone();
    let path = format!("{}/v1/traces", base.path().trim_end_matches('/'));
    url.set_path(&path);
    url
}

/// `key=value` pairs separated by commas, values percent-decoded (the W3C
/// baggage form the specification gives both variables). A malformed entry is
/// left out with a warning that names its position, never its value.
fn pairs(text: &str, variable: &str, warnings: &mut Vec<String>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, entry) in text.split(',').enumerate() {
        if entry.trim().is_empty() {
            continue;
        }
        let decoded = entry.split_once('=').and_then(|(k, v)| {
            let key = k.trim();
            let value = percent_decode(v.trim())?;
            (!key.is_empty()).then(|| (key.to_owned(), value))
        });
        match decoded {
            Some(pair) => out.push(pair),
            None => warnings.push(format!(
                "{variable}: entry {} is not `key=value` (percent-encoded); left out",
                i + 1
            )),
        }
    }
    out
}

/// `%XX` escapes decoded; `None` for a broken escape or bytes that are not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(vars: &[(&str, &str)]) -> Setup {
        from_env(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    fn on(vars: &[(&str, &str)]) -> (Config, Vec<String>) {
        match setup(vars) {
            Setup::On(config, warnings) => (config, warnings),
            other => panic!("not on: {other:?}"),
        }
    }

    fn refused(vars: &[(&str, &str)]) -> String {
        match setup(vars) {
            Setup::Refused(why) => why,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn nothing_set_or_empty_is_off() {
        assert_eq!(setup(&[]), Setup::Off);
        assert_eq!(setup(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "")]), Setup::Off);
        assert_eq!(setup(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "  ")]), Setup::Off);
        // Other OTEL variables alone start nothing.
        assert_eq!(
            setup(&[
                ("OTEL_SERVICE_NAME", "x"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
            ]),
            Setup::Off
        );
    }

    #[test]
    fn switched_off_by_the_sdk_variables() {
        let url = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        assert_eq!(setup(&[url, ("OTEL_SDK_DISABLED", "TRUE")]), Setup::Off);
        assert_eq!(setup(&[url, ("OTEL_TRACES_EXPORTER", "none")]), Setup::Off);
        assert!(matches!(
            setup(&[url, ("OTEL_SDK_DISABLED", "false")]),
            Setup::On(..)
        ));
        assert!(matches!(
            setup(&[url, ("OTEL_TRACES_EXPORTER", "otlp")]),
            Setup::On(..)
        ));
        assert!(refused(&[url, ("OTEL_TRACES_EXPORTER", "zipkin")]).contains("only over OTLP"));
    }

    #[test]
    fn the_generic_endpoint_gets_the_traces_path_the_traces_one_does_not() {
        let (c, _) = on(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")]);
        assert_eq!(c.endpoint.as_str(), "http://127.0.0.1:4318/v1/traces");
        let (c, _) = on(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318/")]);
        assert_eq!(c.endpoint.as_str(), "http://h:4318/v1/traces");
        let (c, _) = on(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318/otlp/")]);
        assert_eq!(c.endpoint.as_str(), "http://h:4318/otlp/v1/traces");
        let (c, _) = on(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:1/base"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://h:2/custom"),
        ]);
        assert_eq!(c.endpoint.as_str(), "http://h:2/custom");
        let (c, _) = on(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://h:2")]);
        assert_eq!(c.endpoint.as_str(), "http://h:2/");
    }

    #[test]
    fn defaults() {
        let (c, warnings) = on(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318")]);
        assert_eq!(c.protocol, Protocol::Protobuf);
        assert_eq!(c.timeout, DEFAULT_TIMEOUT);
        assert!(c.headers.is_empty());
        assert_eq!(
            c.resource,
            [("service.name".to_owned(), "mcpfleet".to_owned())]
        );
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn https_grpc_and_bad_urls_are_refused_with_the_reason() {
        let why = refused(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://h:4318")]);
        assert!(why.contains("over plain HTTP only"), "{why}");
        let why = refused(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ]);
        assert!(why.contains("grpc is not supported"), "{why}");
        let why = refused(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "thrift"),
        ]);
        assert!(why.contains("thrift"), "{why}");
        let why = refused(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318/x y")]);
        assert!(why.contains("OTEL_EXPORTER_OTLP_ENDPOINT"), "{why}");
        let why = refused(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "not a url")]);
        assert!(
            why.contains("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is not a URL"),
            "{why}"
        );
    }

    #[test]
    fn protocol_headers_timeout_and_service_name() {
        let (c, warnings) = on(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "Authorization=Bearer%20s3cret, x-tenant = a%2Cb ,,",
            ),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            ("OTEL_SERVICE_NAME", "fleet-a"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "service.name=ignored,deployment.environment=ci",
            ),
        ]);
        assert_eq!(c.protocol, Protocol::Json);
        assert_eq!(
            c.headers,
            [
                ("Authorization".to_owned(), "Bearer s3cret".to_owned()),
                ("x-tenant".to_owned(), "a,b".to_owned())
            ]
        );
        assert_eq!(c.timeout, Duration::from_millis(2500));
        assert_eq!(
            c.resource,
            [
                ("service.name".to_owned(), "fleet-a".to_owned()),
                ("deployment.environment".to_owned(), "ci".to_owned())
            ]
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        // The traces' own variables win.
        let (c, _) = on(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "1"),
            ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "700"),
        ]);
        assert_eq!(c.protocol, Protocol::Json);
        assert_eq!(c.timeout, Duration::from_millis(700));
        // service.name from the resource attributes when not named otherwise.
        let (c, _) = on(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
            ("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attrs"),
        ]);
        assert_eq!(c.resource[0].1, "from-attrs");
    }

    #[test]
    fn malformed_settings_are_warned_about_without_their_values() {
        let (c, warnings) = on(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "good=1,novalue,bad=%zzsecret,sp ace=x",
            ),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "ten"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
        ]);
        assert_eq!(c.headers, [("good".to_owned(), "1".to_owned())]);
        assert_eq!(c.timeout, DEFAULT_TIMEOUT);
        let all = warnings.join("\n");
        assert!(all.contains("entry 2"), "{all}");
        assert!(all.contains("entry 3"), "{all}");
        assert!(all.contains("`sp ace` is not a header name"), "{all}");
        assert!(all.contains("OTEL_EXPORTER_OTLP_TIMEOUT=ten"), "{all}");
        assert!(all.contains("gzip"), "{all}");
        assert!(!all.contains("secret"), "{all}");
        let (_, warnings) = on(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "0"),
        ]);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
    }
}
