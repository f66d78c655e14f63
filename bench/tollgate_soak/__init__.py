"""The chaos soak behind `bench/soak.py` (usage and the account: bench/README.md, "Chaos soak").

Modules, pure ones first:

- `plan`: the tenants (tiers, keys, failure policies) and the fault schedule for a run length;
- `gwconfig`: the gateway YAML of each reload generation;
- `account`: how an answer is classified, and the loss account's arithmetic and verdicts;
- `wsproto`: the WebSocket handshake value and frames;
- `resp`: Redis commands (the driver's client) and a pipeline for the final key scan;
- `wsbackend`: the WebSocket echo backend (a process of its own);
- `fleet`: the processes (Redis master and replica, three sentinels, two echo backends, the
  WebSocket backend, the gRPC server of demo/grpc/, three gateways) and the faults done to them;
- `clients`, `wsclient`, `grpcload`: the HTTP/1.1 and h2c, WebSocket and gRPC clients;
- `traffic`, `sessions`: the mixed load (`sessions`: its WebSocket sessions and gRPC calls);
- `driver`: one run, start to account.
"""
