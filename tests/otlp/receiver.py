#!/usr/bin/env python3
"""An OTLP traces receiver for the tests: each export, a POST /v1/traces (OTLP/HTTP, protobuf)
or with --grpc a TraceService/Export call (OTLP/gRPC, served by `grpcio`), is decoded with the
OpenTelemetry project's own definitions (the `opentelemetry-proto` package) and every span in
it is appended to OUT as one JSON line: its trace and span ids, its parent, its name, its
attributes, its links and its resource's service name.

    receiver.py PORT_FILE OUT [--delay SECONDS] [--grpc]

It listens on a free loopback port, written to PORT_FILE once it listens. With --delay, each
answer waits that long first (a slow collector).
"""
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

PORT_FILE, OUT = sys.argv[1], sys.argv[2]
DELAY = float(sys.argv[sys.argv.index("--delay") + 1]) if "--delay" in sys.argv else 0.0
GRPC = "--grpc" in sys.argv


def value(v):
    """An attribute's value as JSON."""
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def record(request):
    """Appends each span of an ExportTraceServiceRequest to OUT."""
    with open(OUT, "a", encoding="utf-8") as out:
        for resource_spans in request.resource_spans:
            resource = {a.key: value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    out.write(json.dumps({
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "name": span.name,
                        "attributes": {a.key: value(a.value) for a in span.attributes},
                        "service": resource.get("service.name"),
                        "instance": resource.get("service.instance.id"),
                        "links": [{"trace_id": link.trace_id.hex(), "span_id": link.span_id.hex()}
                                  for link in span.links],
                    }) + "\n")


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if DELAY:
            time.sleep(DELAY)
        if self.path != "/v1/traces":
            self.send_response(404)
            self.end_headers()
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        record(request)
        answer = ExportTraceServiceResponse().SerializeToString()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the exporter gave up waiting (a slow collector)

    def log_message(self, *args):
        pass


def announce(port):
    """Writes the port aside and renames it, so it appears whole."""
    with open(PORT_FILE + ".tmp", "w", encoding="utf-8") as f:
        f.write(str(port))
    os.replace(PORT_FILE + ".tmp", PORT_FILE)


if GRPC:
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request, context):
            if DELAY:
                time.sleep(DELAY)
            record(request)
            return ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(TraceService(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    announce(port)
    server.wait_for_termination()
else:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    announce(server.server_address[1])
    server.serve_forever()
