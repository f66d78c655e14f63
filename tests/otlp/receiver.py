"""A small OTLP trace receiver for the tests: OTLP/gRPC (TraceService/Export) and OTLP/HTTP
with protobuf bodies (POST /v1/traces), built on the opentelemetry-proto package's messages.

Prints `PORTS <grpc> <http>` once listening, then one JSON line per span received:
{"span": {"trace_id", "span_id", "parent_span_id", "name", "kind", "attributes", "resource",
"status", "via"}}. Attribute values are given as plain JSON values.

With `--hold`, the gRPC and HTTP handlers never answer (a collector that accepted the
connection but is stuck), so exports time out.
"""

import json
import sys
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

HOLD = "--hold" in sys.argv
LOCK = threading.Lock()


def value(v):
    kind = v.WhichOneof("value")
    if kind in ("string_value", "bool_value", "int_value", "double_value"):
        return getattr(v, kind)
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    return str(v)


def attrs(kvs):
    return {kv.key: value(kv.value) for kv in kvs}


def report(request, via):
    lines = []
    for rs in request.resource_spans:
        resource = attrs(rs.resource.attributes)
        for ss in rs.scope_spans:
            for span in ss.spans:
                lines.append(json.dumps({"span": {
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "name": span.name,
                    "kind": span.kind,
                    "attributes": attrs(span.attributes),
                    "resource": resource,
                    "status": span.status.code,
                    "via": via,
                }}))
    with LOCK:
        for line in lines:
            print(line)
        sys.stdout.flush()


class Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def Export(self, request, context):
        if HOLD:
            time.sleep(3600)
        report(request, "grpc")
        return trace_service_pb2.ExportTraceServiceResponse()


class Http(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if HOLD:
            time.sleep(3600)
        if self.path != "/v1/traces":
            self.send_response(404)
            self.end_headers()
            return
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(body)
        report(request, "http")
        out = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


def main():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
    grpc_port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    http = ThreadingHTTPServer(("127.0.0.1", 0), Http)
    http.daemon_threads = True
    threading.Thread(target=http.serve_forever, daemon=True).start()
    print(f"PORTS {grpc_port} {http.server_address[1]}", flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
