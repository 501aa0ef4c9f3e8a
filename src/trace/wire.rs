//! The body of an OTLP/HTTP export: an `ExportTraceServiceRequest` with one
//! resource, one instrumentation scope and the batch's spans, in protobuf
//! (`http/protobuf`) or in OTLP's JSON (`http/json`).
//!
//! The protobuf is written by hand: varints, fixed64s and length-delimited
//! fields, with the field numbers of opentelemetry-proto's `trace.proto`,
//! `common.proto`, `resource.proto` and `trace_service.proto` (v1), which are
//! stable. Only the fields mcpfleet fills are written; a receiver reads the rest
//! as their defaults. The JSON follows the protobuf JSON mapping with OTLP's
//! exceptions: ids in hex, enums as numbers.

use serde_json::{Value as Json, json};

use super::span::{Span, Value};

/// The instrumentation scope's name.
pub(crate) const SCOPE: &str = "mcpfleet";

/// What every batch is sent with.
pub(crate) struct Resource<'a> {
    pub attributes: &'a [(String, String)],
}

/// OTLP's status codes (`Status.code`).
const STATUS_ERROR: u64 = 2;
/// W3C trace flags in `Span.flags`: sampled.
const FLAG_SAMPLED: u32 = 1;

/// Protobuf wire types.
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

/// A protobuf message being written.
#[derive(Default)]
struct Message(Vec<u8>);

impl Message {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u32, wire: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire));
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, LEN);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn string(&mut self, field: u32, s: &str) {
        self.bytes(field, s.as_bytes());
    }

    fn uint(&mut self, field: u32, v: u64) {
        self.key(field, VARINT);
        self.varint(v);
    }

    fn fixed64(&mut self, field: u32, v: u64) {
        self.key(field, FIXED64);
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn fixed32(&mut self, field: u32, v: u32) {
        self.key(field, FIXED32);
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn message(&mut self, field: u32, inner: Message) {
        self.bytes(field, &inner.0);
    }
}

/// `KeyValue { string key = 1; AnyValue value = 2; }` with
/// `AnyValue { string string_value = 1; int64 int_value = 3; ... }`.
fn key_value(key: &str, value: &Value) -> Message {
    let mut any = Message::default();
    match value {
        Value::Str(s) => any.string(1, s),
        // int64 is a varint of the two's complement.
        Value::Int(i) => any.uint(3, *i as u64),
    }
    let mut kv = Message::default();
    kv.string(1, key);
    kv.message(2, any);
    kv
}

/// `Span` of `trace.proto`.
fn span(s: &Span) -> Message {
    let mut m = Message::default();
    m.bytes(1, &s.trace_id);
    m.bytes(2, &s.span_id);
    m.string(5, s.name);
    m.uint(6, s.kind as u64);
    m.fixed64(7, s.start);
    m.fixed64(8, s.end);
    for (k, v) in &s.attributes {
        m.message(9, key_value(k, v));
    }
    if let Some(message) = &s.error {
        // Status { string message = 2; StatusCode code = 3; }
        let mut status = Message::default();
        status.string(2, message);
        status.uint(3, STATUS_ERROR);
        m.message(15, status);
    }
    m.fixed32(16, FLAG_SAMPLED);
    m
}

/// `ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }`,
/// `ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; }`,
/// `Resource { repeated KeyValue attributes = 1; }`,
/// `ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; }`,
/// `InstrumentationScope { string name = 1; string version = 2; }`.
pub(crate) fn protobuf(resource: &Resource, spans: &[Span]) -> Vec<u8> {
    let mut res = Message::default();
    for (k, v) in resource.attributes {
        res.message(1, key_value(k, &Value::Str(v.clone())));
    }
    let mut scope = Message::default();
    scope.string(1, SCOPE);
    scope.string(2, env!("CARGO_PKG_VERSION"));
    let mut scope_spans = Message::default();
    scope_spans.message(1, scope);
    for s in spans {
        scope_spans.message(2, span(s));
    }
    let mut resource_spans = Message::default();
    resource_spans.message(1, res);
    resource_spans.message(2, scope_spans);
    let mut request = Message::default();
    request.message(1, resource_spans);
    request.0
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn json_attributes<'a>(attrs: impl Iterator<Item = (&'a str, Json)>) -> Json {
    attrs
        .map(|(key, value)| json!({"key": key, "value": value}))
        .collect()
}

fn json_value(v: &Value) -> Json {
    match v {
        Value::Str(s) => json!({"stringValue": s}),
        // 64-bit integers are strings in the protobuf JSON mapping.
        Value::Int(i) => json!({"intValue": i.to_string()}),
    }
}

/// The same request in OTLP's JSON encoding.
pub(crate) fn json(resource: &Resource, spans: &[Span]) -> Vec<u8> {
    let spans: Vec<Json> = spans
        .iter()
        .map(|s| {
            let mut span = json!({
                "traceId": hex(&s.trace_id),
                "spanId": hex(&s.span_id),
                "name": s.name,
                "kind": s.kind as u8,
                "startTimeUnixNano": s.start.to_string(),
                "endTimeUnixNano": s.end.to_string(),
                "attributes": json_attributes(s.attributes.iter().map(|(k, v)| (*k, json_value(v)))),
                "flags": FLAG_SAMPLED,
            });
            if let Some(message) = &s.error {
                span["status"] = json!({"code": STATUS_ERROR, "message": message});
            }
            span
        })
        .collect();
    let body = json!({
        "resourceSpans": [{
            "resource": {
                "attributes": json_attributes(
                    resource.attributes.iter().map(|(k, v)| (k.as_str(), json!({"stringValue": v})))
                ),
            },
            "scopeSpans": [{
                "scope": {"name": SCOPE, "version": env!("CARGO_PKG_VERSION")},
                "spans": spans,
            }],
        }],
    });
    serde_json::to_vec(&body).expect("a JSON value serializes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::span::Kind;

    #[test]
    fn varints_as_protobuf_writes_them() {
        let mut m = Message::default();
        m.varint(0);
        m.varint(1);
        m.varint(127);
        m.varint(128);
        m.varint(300);
        m.varint(u64::MAX);
        assert_eq!(
            m.0,
            [
                0x00, 0x01, 0x7f, 0x80, 0x01, 0xac, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                0xff, 0xff, 0x01
            ]
        );
    }

    #[test]
    fn fields_have_their_keys() {
        let mut m = Message::default();
        m.string(1, "ab");
        m.fixed64(7, 1);
        m.fixed32(16, 1);
        m.uint(3, 2);
        assert_eq!(
            m.0,
            [
                0x0a, 2, b'a', b'b', // 1:LEN
                0x39, 1, 0, 0, 0, 0, 0, 0, 0, // 7:I64
                0x85, 0x01, 1, 0, 0, 0, // 16:I32, a two-byte key
                0x18, 2, // 3:VARINT
            ]
        );
    }

    fn sample() -> Span {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_795_941_714_123);
        let mut s = Span::new("connect", Kind::Internal, t, t);
        s.trace_id = [0xab; 16];
        s.span_id = [0x01; 8];
        s.str("mcpfleet.server", "alpha");
        s.uint("mcpfleet.generation", 7);
        s.error = Some("it failed".into());
        s
    }

    #[test]
    fn a_request_holds_the_resource_scope_and_spans() {
        let attrs = [("service.name".to_owned(), "mcpfleet".to_owned())];
        let body = protobuf(&Resource { attributes: &attrs }, &[sample()]);
        // resource_spans (1, LEN) leads; the strings are in it as they are.
        assert_eq!(body[0], 0x0a);
        let text = String::from_utf8_lossy(&body);
        for s in ["service.name", "mcpfleet", "connect", "alpha", "it failed"] {
            assert!(text.contains(s), "{s} missing");
        }
        // trace id: field 1 of the span, 16 bytes.
        let id = [[0x0a, 16].as_slice(), &[0xab; 16]].concat();
        assert!(body.windows(id.len()).any(|w| w == id.as_slice()));
    }

    #[test]
    fn the_json_form_has_hex_ids_and_string_integers() {
        let attrs = [("service.name".to_owned(), "svc".to_owned())];
        let body = json(&Resource { attributes: &attrs }, &[sample()]);
        let v: Json = serde_json::from_slice(&body).unwrap();
        let rs = &v["resourceSpans"][0];
        assert_eq!(
            rs["resource"]["attributes"][0],
            json!({"key": "service.name", "value": {"stringValue": "svc"}})
        );
        let span = &rs["scopeSpans"][0]["spans"][0];
        assert_eq!(span["traceId"], "ab".repeat(16));
        assert_eq!(span["spanId"], "01".repeat(8));
        assert_eq!(span["kind"], 1);
        assert_eq!(span["startTimeUnixNano"], "1795941714123000000");
        assert_eq!(
            span["attributes"][1],
            json!({"key": "mcpfleet.generation", "value": {"intValue": "7"}})
        );
        assert_eq!(span["status"], json!({"code": 2, "message": "it failed"}));
    }
}
