"""A small OTLP/HTTP trace receiver for the tests of mcpfleet's traces (tests/it/traces.rs).

It parses what it receives with the OpenTelemetry project's own message classes
(PyPI `opentelemetry-proto`, on Google's `protobuf`), never with mcpfleet's code:
`http/protobuf` bodies with `ExportTraceServiceRequest.FromString`, `http/json` ones
with `json_format.ParseDict` (which refuses unknown fields), after turning OTLP's hex
ids into the base64 that the protobuf JSON mapping has for bytes.

    python otlp_receiver.py

Listens on a free loopback port and prints, one JSON object a line, flushed:

    {"listening": PORT}
    {"request": {"path", "content_type", "user_agent", "headers", "spans"}}   per POST
    {"span": {...}, "resource": {...}, "scope": {...}, "path": ...}          per span
    {"error": "..."}                                                          per body it cannot parse

and answers each export with an empty `ExportTraceServiceResponse` (400 for a body
it cannot parse). It exits when its stdin closes.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from google.protobuf.unknown_fields import UnknownFieldSet
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

OUT = threading.Lock()
# Headers shown in the request line (the tests send their own x-... ones).
SHOWN = ("authorization",)


def emit(obj: dict) -> None:
    with OUT:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def unknown_fields(msg: Message, path: str = "") -> list[str]:
    """Every field of `msg` and its sub-messages that the schema does not know."""
    found = [f"{path or '.'}#{f.field_number}" for f in UnknownFieldSet(msg)]
    for field, value in msg.ListFields():
        if field.message_type is None:
            continue
        items = value if field.is_repeated else [value]
        for i, item in enumerate(items):
            found += unknown_fields(item, f"{path}.{field.name}[{i}]")
    return found


def hex_ids_to_base64(request: dict) -> None:
    """OTLP/JSON writes trace and span ids in hex; the protobuf JSON mapping of
    `bytes` is base64."""
    for rs in request.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key, size in (("traceId", 16), ("spanId", 8), ("parentSpanId", 8)):
                    if key in span and span[key] != "":
                        raw = bytes.fromhex(span[key])
                        if len(raw) != size:
                            raise ValueError(f"{key} {span[key]!r} is not {size} bytes")
                        span[key] = base64.b64encode(raw).decode()


def value(any_value) -> object:
    kind = any_value.WhichOneof("value")
    return None if kind is None else getattr(any_value, kind)


def attributes(kvs) -> dict:
    return {kv.key: value(kv.value) for kv in kvs}


def parse(content_type: str, body: bytes) -> ExportTraceServiceRequest:
    if content_type == "application/x-protobuf":
        request = ExportTraceServiceRequest.FromString(body)
        unknown = unknown_fields(request)
        if unknown:
            raise ValueError(f"fields unknown to the schema: {unknown}")
        return request
    if content_type == "application/json":
        doc = json.loads(body)
        hex_ids_to_base64(doc)
        return json_format.ParseDict(doc, ExportTraceServiceRequest())
    raise ValueError(f"unexpected Content-Type {content_type!r}")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # no access log on stderr
        pass

    def do_POST(self) -> None:
        try:
            self.receive()
        except Exception as e:  # a bug here must show in the test, not only on stderr
            emit({"error": f"receiver: {type(e).__name__}: {e}", "path": self.path})
            self.answer(500, b"", "text/plain")

    def receive(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        try:
            request = parse(content_type, body)
        except (DecodeError, ValueError, json_format.ParseError) as e:
            emit({"error": f"{type(e).__name__}: {e}", "path": self.path, "content_type": content_type})
            self.answer(400, b"", "text/plain")
            return
        headers = {k.lower(): v for k, v in self.headers.items()
                   if k.lower().startswith("x-") or k.lower() in SHOWN}
        spans = [
            (rs, ss, span)
            for rs in request.resource_spans
            for ss in rs.scope_spans
            for span in ss.spans
        ]
        emit({"request": {
            "path": self.path,
            "content_type": content_type,
            "user_agent": self.headers.get("User-Agent"),
            "headers": headers,
            "spans": len(spans),
        }})
        for rs, ss, span in spans:
            emit({
                "path": self.path,
                "resource": attributes(rs.resource.attributes),
                "scope": {"name": ss.scope.name, "version": ss.scope.version},
                "span": {
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "name": span.name,
                    "kind": span.kind,
                    "start": span.start_time_unix_nano,
                    "end": span.end_time_unix_nano,
                    "flags": span.flags,
                    "attributes": attributes(span.attributes),
                    "status": {"code": span.status.code, "message": span.status.message},
                },
            })
        if content_type == "application/json":
            self.answer(200, b"{}", "application/json")
        else:
            self.answer(200, ExportTraceServiceResponse().SerializeToString(), content_type)

    def answer(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    emit({"listening": server.server_address[1]})
    sys.stdin.read()  # until the test closes our stdin (or exits)
    server.shutdown()


if __name__ == "__main__":
    main()
