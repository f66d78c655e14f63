"""The chaos soak behind `bench/soak.py` (usage and the account: bench/README.md, "Chaos soak").

Modules, pure ones first:

- `plan`: the tenants (tiers, keys, failure policies) and the fault schedule for a run length;
- `gwconfig`: the gateway YAML of each reload generation;
- `account`: how an answer is classified, and the loss account's arithmetic and verdicts;
- `resp`: Redis commands (the driver's client) and a pipeline for the final key scan;
- `fleet`: the processes (Redis master and replica, three sentinels, two echo backends, three
  gateways) and the faults done to them;
- `traffic`: the HTTP/1.1 and h2c clients and the mixed load;
- `driver`: one run, start to account.
"""
