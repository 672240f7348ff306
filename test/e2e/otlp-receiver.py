#!/usr/bin/python3
"""An OTLP/HTTP trace receiver for the tracing tests, independent of the exporter under test: it decodes each
ExportTraceServiceRequest with the official protobuf definitions (opentelemetry-proto's generated modules: Debian's
python3-opentelemetry-proto or a pinned venv; scripts/install-test-deps.sh installs one) and prints every span as one
JSON line on stdout. The first line is {"port": N}. Only POST /v1/traces with application/x-protobuf is accepted."""
import gzip
import json
import threading
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse


def any_value(v):
    kind = v.WhichOneof("value")
    if kind == "int_value":
        return v.int_value
    if kind == "double_value":
        return v.double_value
    if kind == "string_value":
        return v.string_value
    if kind == "bool_value":
        return v.bool_value
    return MessageToDict(v)


def attributes(pairs):
    return {kv.key: any_value(kv.value) for kv in pairs}


class Handler(BaseHTTPRequestHandler):
    def read_body(self):
        if self.headers.get("transfer-encoding", "").lower() != "chunked":
            return self.rfile.read(int(self.headers.get("content-length", "0")))
        # the Node http exporter streams its body in chunks
        body = b""
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                self.rfile.readline()
                return body
            body += self.rfile.read(size)
            self.rfile.readline()

    def do_POST(self):
        body = self.read_body()
        if self.path != "/v1/traces" or self.headers.get("content-type") != "application/x-protobuf":
            self.send_response(415 if self.path == "/v1/traces" else 404)
            self.end_headers()
            return
        if self.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        if not body:
            # an empty export is a broken sender (or a broken read here): fail it loudly, never a silent 200
            self.send_response(400)
            self.end_headers()
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        lines = []
        for resource_spans in request.resource_spans:
            resource = attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    lines.append(json.dumps({
                        "traceId": span.trace_id.hex(), "spanId": span.span_id.hex(), "parentSpanId": span.parent_span_id.hex(),
                        "name": span.name, "kind": span.kind, "scope": scope_spans.scope.name,
                        "startTimeUnixNano": span.start_time_unix_nano, "endTimeUnixNano": span.end_time_unix_nano,
                        "attributes": attributes(span.attributes), "resource": resource,
                    }))
        # the server answers exports from several processes on threads at once: one writer at a time keeps lines whole
        with PRINT_LOCK:
            for line in lines:
                print(line, flush=True)
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


PRINT_LOCK = threading.Lock()
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(json.dumps({"port": server.server_address[1]}), flush=True)
try:
    server.serve_forever()
except KeyboardInterrupt:
    sys.exit(0)
