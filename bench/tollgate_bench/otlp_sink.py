#!/usr/bin/env python3
"""A discard OTLP/HTTP trace endpoint for the tracing variants (H, I): answers every
`POST /v1/traces` 200 with an empty `ExportTraceServiceResponse` (an empty protobuf message is
zero bytes) and keeps only counts, printed at exit. Standard library only.

Usage: otlp_sink.py PORT
"""

import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COUNTS = {"requests": 0, "bytes": 0}


class Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):  # noqa: N802 (the http.server naming)
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        COUNTS["requests"] += 1
        COUNTS["bytes"] += n
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def main():
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink)

    def stop(*_):
        print(f"otlp sink: {COUNTS['requests']} exports, {COUNTS['bytes']} bytes", flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    server.serve_forever()


if __name__ == "__main__":
    main()
