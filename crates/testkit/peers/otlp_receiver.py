"""An OTLP/HTTP trace receiver for tests: accepts `POST /v1/traces` with an
`ExportTraceServiceRequest` in protobuf, decodes it with the official OpenTelemetry
definitions (PyPI's `opentelemetry-proto`), and appends one JSON line per span to OUT:

    {"name", "trace_id", "span_id", "parent_span_id", "kind", "start_ns", "end_ns",
     "attributes": {...}, "events": [{"name", "attributes"}], "resource": {...},
     "status": {"code", "message"}}

Binds 127.0.0.1 on a free port and prints `PORT <n>` on stdout once listening.

    python otlp_receiver.py OUT
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2

MAX_BODY = 16 * 1024 * 1024


def value(v: common_pb2.AnyValue):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind) if kind else None


def attributes(kvs) -> dict:
    return {kv.key: value(kv.value) for kv in kvs}


class Handler(BaseHTTPRequestHandler):
    out = ""

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        length = int(self.headers.get("content-length", "0"))
        if self.path != "/v1/traces" or length > MAX_BODY:
            self.send_response(404 if self.path != "/v1/traces" else 413)
            self.end_headers()
            return
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(self.rfile.read(length))
        lines = []
        for resource_spans in request.resource_spans:
            resource = attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    lines.append(json.dumps({
                        "name": span.name,
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "kind": span.kind,
                        "start_ns": span.start_time_unix_nano,
                        "end_ns": span.end_time_unix_nano,
                        "attributes": attributes(span.attributes),
                        "events": [{"name": e.name, "attributes": attributes(e.attributes)} for e in span.events],
                        "resource": resource,
                        "status": {"code": span.status.code, "message": span.status.message},
                    }))
        with open(self.out, "a", encoding="utf-8") as f:
            for line in lines:
                f.write(line + "\n")
        body = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:  # quiet
        pass


if __name__ == "__main__":
    Handler.out = sys.argv[1]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"PORT {server.server_address[1]}", flush=True)
    server.serve_forever()
