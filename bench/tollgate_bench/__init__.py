"""tollgate benchmark driver, split by concern (standard library only). Entry point: bench/run.py.

Modules:
  common      paths, constants, log(), BenchError, small helpers shared by all
  processes   the temp directory and every started process (Env, Proc), ports, /proc readings
  clients     tiny HTTP, Prometheus-scrape and Redis (RESP, INFO) clients
  servers     start nginx (backend, proxies), redis-server and tollgate with generated configs
  wrk         wrk command lines and the parsing of report.lua's summary line
  variants    the systems under test A, B, C, P, D-G: start, probe, stop
  measure     one measured wrk run with CPU / Redis / metrics deltas; medians over repetitions
  throughput, memory, accuracy, profile   the suites (data only, no printing)
  targets     pure: results -> ratios and target verdicts (PASS / FAIL / n/a)
  report      the terminal text of each suite (prints the verdicts of `targets`)
  compare     two result files side by side
  results     build, tool checks, environment and the results JSON
  cli         argument parsing and the subcommands
"""
