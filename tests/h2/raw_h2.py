"""A raw HTTP/2 client for the request-head tests: sends each request's header block exactly as
written (pseudo-header fields included, no validation or normalisation on the client side), one
connection per request, and reports what came back.

    raw_h2.py HOST PORT [--tls CA_FILE SNI] < requests.json > answers.json

requests.json: a list of header lists, each `[[name, value], ...]` in order (`:method`,
`:scheme`, `:path`, and `:authority` when wanted, first). answers.json: one object per request:
`{"status": int|null, "headers": {name: value}, "body": str, "reset": int|null,
"error": str|null}` (`reset` is the RST_STREAM or GOAWAY error code when the stream was refused
that way).
"""

import json
import socket
import ssl
import sys

import h2.config
import h2.connection
import h2.events


def exchange(host, port, tls, headers):
    sock = socket.create_connection((host, port), timeout=10)
    if tls:
        ca, sni = tls
        ctx = ssl.create_default_context(cafile=ca)
        ctx.set_alpn_protocols(["h2"])
        sock = ctx.wrap_socket(sock, server_hostname=sni)
        assert sock.selected_alpn_protocol() == "h2", sock.selected_alpn_protocol()
    config = h2.config.H2Configuration(
        client_side=True,
        header_encoding=None,
        validate_outbound_headers=False,
        normalize_outbound_headers=False,
        validate_inbound_headers=False,
    )
    conn = h2.connection.H2Connection(config=config)
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    block = [(n.encode("latin-1"), v.encode("latin-1")) for n, v in headers]
    conn.send_headers(1, block, end_stream=True)
    sock.sendall(conn.data_to_send())
    answer = {"status": None, "headers": {}, "body": "", "reset": None, "error": None}
    body = b""
    done = False
    try:
        while not done:
            data = sock.recv(65536)
            if not data:
                answer["error"] = "connection closed"
                break
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived) and event.stream_id == 1:
                    for n, v in event.headers:
                        n, v = n.decode("latin-1"), v.decode("latin-1")
                        if n == ":status":
                            answer["status"] = int(v)
                        else:
                            answer["headers"][n] = v
                elif isinstance(event, h2.events.DataReceived) and event.stream_id == 1:
                    body += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, 1)
                elif isinstance(event, h2.events.StreamEnded) and event.stream_id == 1:
                    done = True
                elif isinstance(event, h2.events.StreamReset) and event.stream_id == 1:
                    answer["reset"] = int(event.error_code)
                    done = True
                elif isinstance(event, h2.events.ConnectionTerminated):
                    answer["reset"] = int(event.error_code)
                    done = True
            pending = conn.data_to_send()
            if pending:
                sock.sendall(pending)
    except (OSError, h2.exceptions.ProtocolError) as e:
        answer["error"] = repr(e)
    finally:
        sock.close()
    answer["body"] = body.decode("utf-8", "replace")
    return answer


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    tls = (sys.argv[4], sys.argv[5]) if len(sys.argv) > 3 and sys.argv[3] == "--tls" else None
    requests = json.load(sys.stdin)
    json.dump([exchange(host, port, tls, r) for r in requests], sys.stdout)


if __name__ == "__main__":
    main()
