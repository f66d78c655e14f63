"""Target verdicts (bench/tollgate_bench/targets.py) against the committed results in bench/results/.

Run: python3 -m unittest discover -s bench/tests   (standard library only; no build, no network)

Each committed JSON holds the raw figures of a run and the verdicts the driver printed for it. These
tests re-evaluate the raw figures with the pure `targets` functions and check (1) the verdicts the
figures imply, named one by one for the reference run, and (2) that every committed file's recorded
verdicts are reproduced exactly.
"""

import copy
import json
import sys
import unittest
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BENCH))

from tollgate_bench import targets  # noqa: E402

RESULTS = BENCH / "results"
# The full run (`all --reps 5`, with the Pingora floor) the figures in bench/RESULTS.md come from.
REFERENCE = RESULTS / "20261130-021532.json"
# `throughput --variants DE`: only E/D can be judged.
DE_ONLY = RESULTS / "20261130-010658.json"


def load(path):
    return json.loads(path.read_text())


def by_key(verdicts):
    return {v.key: v for v in verdicts}


def raw(data):
    """The results without what the driver derived from them (ratios, targets, figures)."""
    data = copy.deepcopy(data)
    for section in ("throughput", "memory"):
        for k in ("ratios", "targets", "f_over_b_ceiling", "added_p99_ms_at_half_f"):
            data.get(section, {}).pop(k, None)
    return data


class ReferenceRun(unittest.TestCase):
    """Verdicts implied by the committed figures of the reference run."""

    @classmethod
    def setUpClass(cls):
        cls.data = raw(load(REFERENCE))
        cls.verdicts = targets.evaluate(cls.data)
        cls.tp = by_key(cls.verdicts["throughput"])
        cls.mem = by_key(cls.verdicts["memory"])
        cls.summary = cls.data["throughput"]["summary"]

    def test_f_over_b_is_missed(self):
        v = self.tp["f_over_b"]
        expected = self.summary["F"]["rps"] / self.summary["B"]["rps"]
        self.assertAlmostEqual(v.value, expected)
        self.assertAlmostEqual(v.value, 0.434, places=3)
        self.assertIs(v.ok, False)
        self.assertEqual(v.label, "FAIL")
        self.assertEqual(v.shown, "F/B = 0.434")

    def test_e_over_d_is_met(self):
        v = self.tp["e_over_d"]
        self.assertAlmostEqual(v.value, self.summary["E"]["rps"] / self.summary["D"]["rps"])
        self.assertGreaterEqual(v.value, 0.95)
        self.assertIs(v.ok, True)
        self.assertEqual(v.label, "PASS")

    def test_one_evalsha_per_admitted_decision_is_met_every_rep(self):
        v = self.tp["evalsha_per_admitted"]
        f_reps = [r for r in self.data["throughput"]["records"] if r["variant"] == "F"]
        self.assertEqual(len(v.value), len(f_reps))
        self.assertEqual(v.value, [1.0] * len(f_reps))
        for r in f_reps:
            self.assertEqual(r["redis"]["evalsha"], r["tollgate"]["tenant_admitted"])
        self.assertIs(v.ok, True)

    def test_commands_per_read_is_met(self):
        v = self.tp["commands_per_read"]
        self.assertEqual(v.value, self.summary["F"]["redis_client_cmds_per_read"])
        self.assertGreater(v.value, 1.0)
        self.assertIs(v.ok, True)

    def test_g_flood_is_met(self):
        v = self.tp["g_flood"]
        self.assertAlmostEqual(v.value, self.summary["G"]["non2xx_rps"] / self.summary["F"]["ok_rps"])
        self.assertGreaterEqual(v.value, 2.0)
        self.assertIs(v.ok, True)

    def test_added_p99_at_half_of_b_is_missed(self):
        v = self.tp["added_p99"]
        ps = self.data["throughput"]["paced_summary"]
        (a,) = [k for k in ps if k.startswith("A@") and not k.endswith("/halfF")]
        (f,) = [k for k in ps if k.startswith("F@") and not k.endswith("/halfF")]
        self.assertAlmostEqual(v.value, ps[f]["p99_ms"] - ps[a]["p99_ms"])
        self.assertGreater(v.value, 1.0)
        self.assertIs(v.ok, False)
        self.assertEqual(v.target, "added p99 of F over A at 50% of B's max rate <= 1 ms")

    def test_memory_targets_are_met(self):
        self.assertIs(self.mem["tracked_plateau"].ok, True)
        self.assertEqual(self.mem["tracked_plateau"].value, self.data["memory"]["max_clients"])
        bpc = self.mem["bytes_per_client"]
        self.assertEqual(bpc.value, self.data["memory"]["bytes_per_tracked_client"])
        self.assertLessEqual(bpc.value, 200)
        self.assertIs(bpc.ok, True)

    def test_order_of_targets(self):
        self.assertEqual([v.key for v in self.verdicts["throughput"]],
                         ["f_over_b", "e_over_d", "evalsha_per_admitted", "commands_per_read",
                          "g_flood", "added_p99", "f_over_t", "d_over_t0", "d_over_p_cpu",
                          "f_over_p", "l_over_d", "r_over_f", "x_cpu", "x_redis_calls",
                          "h_over_f", "s_over_f"])
        self.assertEqual([v.key for v in self.verdicts["memory"]],
                         ["tracked_plateau", "bytes_per_client"])

    def test_evaluation_does_not_touch_its_input(self):
        before = copy.deepcopy(self.data)
        targets.evaluate(self.data)
        self.assertEqual(self.data, before)


class PartialRun(unittest.TestCase):
    """A run of only D and E: the other targets are n/a, not FAIL."""

    def test_only_e_over_d_is_judged(self):
        tp = by_key(targets.evaluate(raw(load(DE_ONLY)))["throughput"])
        self.assertIs(tp["e_over_d"].ok, True)
        for key in ("f_over_b", "commands_per_read", "g_flood", "added_p99"):
            self.assertIsNone(tp[key].ok, key)
            self.assertIsNone(tp[key].value, key)
            self.assertEqual(tp[key].label, "n/a ", key)
        self.assertNotIn("evalsha_per_admitted", tp)  # F did not run


class Thresholds(unittest.TestCase):
    """The same figures moved across a threshold flip the verdict (the tests above can fail)."""

    def setUp(self):
        self.data = raw(load(REFERENCE))
        self.s = self.data["throughput"]["summary"]

    def verdict(self, key):
        return by_key(targets.evaluate(self.data)["throughput"])[key]

    def test_f_over_b_met_at_exactly_0_90(self):
        self.s["B"]["rps"], self.s["F"]["rps"] = 1000.0, 900.0
        self.assertIs(self.verdict("f_over_b").ok, True)
        self.s["F"]["rps"] = 899.0
        self.assertIs(self.verdict("f_over_b").ok, False)

    def test_e_over_d_missed_below_0_95(self):
        self.s["E"]["rps"] = self.s["D"]["rps"] * 0.94
        self.assertIs(self.verdict("e_over_d").ok, False)

    def test_coalesced_runs_need_at_most_one_evalsha_per_admission(self):
        f_reps = [r for r in self.data["throughput"]["records"] if r["variant"] == "F"]
        for r in f_reps:
            r["coalescing"] = True
        f_reps[0]["redis"]["evalsha"] = f_reps[0]["tollgate"]["tenant_admitted"] // 7
        v = self.verdict("evalsha_per_admitted")
        self.assertIs(v.ok, True)
        self.assertIn("at most 1.0", v.target)
        f_reps[0]["redis"]["evalsha"] = f_reps[0]["tollgate"]["tenant_admitted"] + 1
        self.assertIs(self.verdict("evalsha_per_admitted").ok, False)
        f_reps[0]["redis"]["evalsha"] = 0
        self.assertIs(self.verdict("evalsha_per_admitted").ok, False)

    def test_one_extra_evalsha_in_one_rep_fails(self):
        rec = next(r for r in self.data["throughput"]["records"] if r["variant"] == "F")
        rec["redis"]["evalsha"] += 1
        v = self.verdict("evalsha_per_admitted")
        self.assertIs(v.ok, False)
        self.assertGreater(max(v.value), 1.0)

    def test_a_local_fallback_fails_the_evalsha_target_and_is_named(self):
        rec = next(r for r in self.data["throughput"]["records"] if r["variant"] == "F")
        rec["tollgate"]["tenant_fallback"] = 3
        rec["tenant_decisions"] += 3
        v = self.verdict("evalsha_per_admitted")
        self.assertIs(v.ok, False)
        self.assertIn(f"rep {rec['rep']}: {{'tenant_fallback': 3}}", v.shown)

    def test_one_command_per_read_fails(self):
        self.s["F"]["redis_client_cmds_per_read"] = 1.0
        self.assertIs(self.verdict("commands_per_read").ok, False)

    def test_added_p99_of_one_ms_is_met(self):
        ps = self.data["throughput"]["paced_summary"]
        a = next(k for k in ps if k.startswith("A@") and not k.endswith("/halfF"))
        f = next(k for k in ps if k.startswith("F@") and not k.endswith("/halfF"))
        ps[f]["p99_ms"] = ps[a]["p99_ms"] + 1.0
        self.assertIs(self.verdict("added_p99").ok, True)

    def test_the_latency_target_is_named_after_the_paced_fraction(self):
        self.data["params"]["paced_fraction"] = 0.25
        self.assertEqual(self.verdict("added_p99").target,
                         "added p99 of F over A at 25% of B's max rate <= 1 ms")

    def test_memory_above_200_bytes_per_client_fails(self):
        self.data["memory"]["bytes_per_tracked_client"] = 201.0
        mem = by_key(targets.evaluate(self.data)["memory"])
        self.assertIs(mem["bytes_per_client"].ok, False)


class PeerAndFloorTargets(unittest.TestCase):
    """Issue 18's targets (Traefik T/T0, the Pingora floor, leasing) on the reference run's
    figures plus injected T, T0 and L medians: each threshold flips its verdict."""

    def setUp(self):
        self.data = raw(load(REFERENCE))
        self.s = self.data["throughput"]["summary"]

    def verdict(self, key):
        return by_key(targets.evaluate(self.data)["throughput"])[key]

    def test_reference_run_has_no_traefik_or_lease(self):
        for key in ("f_over_t", "d_over_t0", "l_over_d"):
            self.assertIsNone(self.verdict(key).ok, key)
        self.assertNotIn("lease_commands", by_key(targets.evaluate(self.data)["throughput"]))

    def test_floor_ratios_of_the_reference_run(self):
        v = self.verdict("d_over_p_cpu")
        self.assertAlmostEqual(v.value, self.s["P"]["proxy_cpu_us_per_req"]
                               / self.s["D"]["proxy_cpu_us_per_req"])
        self.assertIs(v.ok, v.value >= 0.95)
        f = self.verdict("f_over_p")
        self.assertAlmostEqual(f.value, self.s["F"]["rps"] / self.s["P"]["rps"])

    def test_f_over_t_threshold(self):
        self.s["T"] = {"rps": self.s["F"]["rps"] / 2.5}
        self.assertIs(self.verdict("f_over_t").ok, True)
        self.s["T"]["rps"] *= 1.01
        self.assertIs(self.verdict("f_over_t").ok, False)

    def test_d_over_t0_threshold(self):
        self.s["T0"] = {"rps": self.s["D"]["rps"] / 2}
        self.assertIs(self.verdict("d_over_t0").ok, True)
        self.s["T0"]["rps"] *= 1.01
        self.assertIs(self.verdict("d_over_t0").ok, False)

    def test_cpu_per_request_threshold(self):
        self.s["P"]["proxy_cpu_us_per_req"] = 95.0
        self.s["D"]["proxy_cpu_us_per_req"] = 100.0
        self.assertIs(self.verdict("d_over_p_cpu").ok, True)
        self.s["D"]["proxy_cpu_us_per_req"] = 100.5
        self.assertIs(self.verdict("d_over_p_cpu").ok, False)

    def test_leased_throughput_and_commands(self):
        self.s["L"] = {"rps": self.s["D"]["rps"] * 0.95}
        self.assertIs(self.verdict("l_over_d").ok, True)
        self.s["L"]["rps"] *= 0.99
        self.assertIs(self.verdict("l_over_d").ok, False)
        recs = self.data["throughput"]["records"]
        recs.append({"variant": "L", "rep": 1, "redis": {}, "lease_tokens": 100,
                     "redis_client_cmds_per_admitted": 0.02})
        self.assertIs(self.verdict("lease_commands").ok, True)
        recs.append({"variant": "L", "rep": 2, "redis": {}, "lease_tokens": 100,
                     "redis_client_cmds_per_admitted": 0.0201})
        v = self.verdict("lease_commands")
        self.assertIs(v.ok, False)
        self.assertEqual(v.value, [0.02, 0.0201])


class RulesTargets(unittest.TestCase):
    """Variant R (F + five tenant-keyed limit rules): R/F >= 0.9 and at most one script call
    per tenant decision in every R rep, on the reference run's figures plus injected R ones."""

    def setUp(self):
        self.data = raw(load(REFERENCE))
        self.s = self.data["throughput"]["summary"]
        self.recs = self.data["throughput"]["records"]

    def verdicts(self):
        return by_key(targets.evaluate(self.data)["throughput"])

    def r_rec(self, rep, calls, decisions, admitted=None):
        return {"variant": "R", "rep": rep, "requests": decisions,
                "redis": {"evalsha": calls, "eval": 0}, "tenant_decisions": decisions,
                "tollgate": {"tenant_admitted": decisions if admitted is None else admitted}}

    def test_reference_run_has_no_r(self):
        v = self.verdicts()
        self.assertIsNone(v["r_over_f"].ok)
        self.assertEqual(v["r_over_f"].shown, "needs F and R")
        self.assertNotIn("r_script_calls", v)

    def test_r_over_f_threshold(self):
        self.s["R"] = {"rps": self.s["F"]["rps"] * 0.9}
        v = self.verdicts()["r_over_f"]
        self.assertAlmostEqual(v.value, 0.9)
        self.assertIs(v.ok, True)
        self.s["R"]["rps"] *= 0.99
        self.assertIs(self.verdicts()["r_over_f"].ok, False)

    def test_one_script_call_per_decision_every_rep(self):
        self.recs += [self.r_rec(1, 1000, 1000), self.r_rec(2, 700, 1000)]
        v = self.verdicts()["r_script_calls"]
        self.assertIs(v.ok, True)
        self.assertEqual(v.value, [1.0, 0.7])
        self.assertIn("1000/1000 = 1.0000", v.shown)

    def test_more_calls_than_decisions_fails(self):
        self.recs += [self.r_rec(1, 1000, 1000), self.r_rec(2, 1001, 1000)]
        self.assertIs(self.verdicts()["r_script_calls"].ok, False)

    def test_no_call_or_a_decision_outside_redis_fails(self):
        self.recs += [self.r_rec(1, 0, 1000)]
        self.assertIs(self.verdicts()["r_script_calls"].ok, False)
        self.recs[-1] = self.r_rec(1, 990, 1000, admitted=990)
        self.assertIs(self.verdicts()["r_script_calls"].ok, False)

    def test_r_is_one_variant_name(self):
        from tollgate_bench.variants import parse_variants, r_rules
        self.assertEqual(parse_variants("PDFRT"), ["P", "D", "F", "R", "T"])
        rules = r_rules()
        self.assertEqual(len(rules), 5)
        self.assertTrue(all("tenant" in r["key"] for r in rules))
        self.assertGreaterEqual(len({r["algorithm"] for r in rules}), 2)


class InflightVariant(unittest.TestCase):
    """Variant M (F + the tier's max_in_flight): M/F is a printed ratio (no target), and script
    calls per admitted request split into rate, lease acquire, release and renewal."""

    def m_rec(self, evalsha, cs, admitted):
        return {"variant": "M", "rep": 1, "requests": admitted,
                "redis": {"evalsha": evalsha, "eval": 0, "commandstats": cs},
                "tollgate": {"tenant_admitted": admitted}}

    def test_m_over_f_ratio(self):
        r = targets.throughput_ratios({"F": {"rps": 1000.0}, "M": {"rps": 800.0}})
        self.assertAlmostEqual(r["M/F rps"], 0.8)
        self.assertIsNone(targets.throughput_ratios({"F": {"rps": 1000.0}})["M/F rps"])

    def test_no_m_target(self):
        data = raw(load(REFERENCE))
        data["throughput"]["summary"]["M"] = {"rps": 1.0}
        keys = by_key(targets.evaluate(data)["throughput"])
        self.assertFalse([k for k in keys if k.startswith("m_")])

    def test_split_by_script(self):
        # 1000 admitted: 2 renewals, 1000 acquires (ZCARD), 1000 releases (ZREM), 250 coalesced
        # token-bucket calls; token_bucket.lua's own commands do not enter the split.
        cs = {"zcard": 1000, "zrem": 1000, "zremrangebyscore": 1002, "hmget": 250, "evalsha": 2252}
        c = targets.script_calls_split(self.m_rec(2252, cs, 1000))
        self.assertEqual((c["calls"], c["acquire"], c["release"], c["renew"], c["rate"]),
                         (2252, 1000, 1000, 2, 250))
        self.assertEqual(c["admitted"], 1000)

    def test_split_without_leases_is_all_rate(self):
        c = targets.script_calls_split(self.m_rec(300, {"hmget": 300}, 1000))
        self.assertEqual((c["acquire"], c["release"], c["renew"], c["rate"]), (0, 0, 0, 300))

    def test_m_is_one_variant_name(self):
        from tollgate_bench.variants import M_MAX_IN_FLIGHT, VARIANTS, parse_variants
        self.assertEqual(parse_variants("PFMR"), ["P", "F", "M", "R"])
        self.assertIn("M", VARIANTS)
        self.assertGreater(M_MAX_IN_FLIGHT, 0)


class FloorAgainstTraefik(unittest.TestCase):
    """The runs the bench/RESULTS.md target tables come from: the Pingora floor's own ratios against
    Traefik bound D/T0 and F/T, and P/T0 is below the D/T0 target in each of them."""

    RUNS = ["20261201-084256.json", "20261202-061504.json", "20261202-062458.json"]

    def test_floor_ratios_bound_the_peer_targets(self):
        for run in self.RUNS:
            with self.subTest(run=run):
                self._check(raw(load(RESULTS / run)))

    def _check(self, data):
        s = data["throughput"]["summary"]
        r = targets.throughput_ratios(s)
        self.assertAlmostEqual(r["P/T0 rps"], s["P"]["rps"] / s["T0"]["rps"])
        self.assertAlmostEqual(r["P/T rps"], s["P"]["rps"] / s["T"]["rps"])
        self.assertLess(r["P/T0 rps"], 2.0)
        self.assertLessEqual(r["D/T0 rps"], r["P/T0 rps"])
        self.assertLessEqual(r["F/T rps"], r["P/T rps"])
        v = by_key(targets.evaluate(data)["throughput"])
        self.assertIn(f"the Pingora floor itself: {r['P/T0 rps']:.3f}", v["d_over_t0"].shown)
        self.assertIn(f"the Pingora floor itself: {r['P/T rps']:.3f}", v["f_over_t"].shown)


class FeatureTargets(unittest.TestCase):
    """The variants beside F (decision service X, tracing H/I, counted N, store keys S)."""

    def summary(self, **variants):
        base = {"F": {"rps": 30000, "proxy_cpu_us_per_req": 30.0, "script_calls_per_req": 0.08}}
        base.update(variants)
        return {"summary": base, "records": [], "paced_summary": {}}

    def test_decision_service_against_f(self):
        res = self.summary(X={"rps": 40000, "proxy_cpu_us_per_req": 12.0,
                              "script_calls_per_req": 1.0})
        v = by_key(targets.feature_targets(res))
        self.assertAlmostEqual(v["x_cpu"].value, 0.4)
        self.assertIs(v["x_cpu"].ok, True)
        # One script call per decision against F's coalesced calls: missed.
        self.assertIs(v["x_redis_calls"].ok, False)
        self.assertIn("X 1.0000, F 0.0800", v["x_redis_calls"].shown)

    def test_tracing_and_store_keys_against_f(self):
        res = self.summary(H={"rps": 29000, "proxy_cpu_us_per_req": 31.0},
                           S={"rps": 27000, "proxy_cpu_us_per_req": 33.0})
        v = by_key(targets.feature_targets(res))
        self.assertIs(v["h_over_f"].ok, True)
        self.assertIs(v["s_over_f"].ok, False)
        r = targets.throughput_ratios(res["summary"])
        self.assertAlmostEqual(r["H/F CPU µs/req"], 31.0 / 30.0)
        self.assertIsNone(r["N/F rps"])

    def test_without_the_variants_nothing_is_judged(self):
        v = by_key(targets.feature_targets(self.summary()))
        self.assertEqual({k: x.ok for k, x in v.items()},
                         {"x_cpu": None, "x_redis_calls": None, "h_over_f": None, "s_over_f": None})


class DecisionVariant(unittest.TestCase):
    """Variant X's request body and h2load's summary."""

    def test_request_is_a_grpc_framed_rate_limit_request(self):
        from tollgate_bench.decision import grpc_frame, rls_request
        msg = rls_request("bench", [("tenant", "bench")])
        # domain = 1 "bench"; descriptors = 2 { entries = 1 { key = 1 "tenant", value = 2 "bench" } }
        self.assertEqual(msg.hex(), "0a0562656e636812110a0f0a0674656e616e74120562656e6368")
        frame = grpc_frame(msg)
        self.assertEqual(frame[:5], b"\x00\x00\x00\x00" + bytes([len(msg)]))
        self.assertEqual(frame[5:], msg)

    def test_h2load_summary(self):
        from tollgate_bench.decision import parse_h2load
        out = """finished in 5.00s, 12345.60 req/s, 1.20MB/s
requests: 61728 total, 61800 started, 61728 done, 61728 succeeded, 0 failed, 0 errored, 0 timeout
status codes: 61728 2xx, 0 3xx, 0 4xx, 0 5xx
"""
        h = parse_h2load(out)
        self.assertEqual((h["rps"], h["requests"], h["succeeded"], h["status_2xx"]),
                         (12345.6, 61728, 61728, 61728))
        self.assertEqual(h["duration_s"], 5.0)


class VariantNames(unittest.TestCase):
    def test_t0_is_one_name(self):
        from tollgate_bench.variants import parse_variants
        self.assertEqual(parse_variants("abT0TPDFGL"), ["A", "B", "T0", "T", "P", "D", "F", "G", "L"])

    def test_unknown_letter_is_refused(self):
        from tollgate_bench.common import BenchError
        from tollgate_bench.variants import parse_variants
        with self.assertRaises(BenchError):
            parse_variants("DZ")


class CommittedResults(unittest.TestCase):
    """Every committed results file: the verdicts recorded by the driver that wrote it are
    exactly what the pure evaluation of its raw figures gives today (files older than a target
    do not record it: each recorded verdict is compared, in its recorded order)."""

    def test_recorded_verdicts_are_reproduced(self):
        files = sorted(RESULTS.glob("*.json"))
        self.assertGreater(len(files), 0)
        judged = 0
        for path in files:
            data = load(path)
            verdicts = targets.evaluate(raw(data))
            for section, vs in verdicts.items():
                with self.subTest(file=path.name, section=section):
                    recorded = data[section]["targets"]
                    names = {t["target"] for t in recorded}
                    self.assertEqual([v.as_json() for v in vs if v.target in names], recorded)
                    judged += 1
        self.assertGreaterEqual(judged, 6)  # 3 throughput and 3 memory sections are committed

    def test_recorded_ratios_are_reproduced(self):
        for path in sorted(RESULTS.glob("*.json")):
            data = load(path)
            if "throughput" not in data:
                continue
            with self.subTest(file=path.name):
                recorded = data["throughput"]["ratios"]
                computed = targets.throughput_ratios(data["throughput"]["summary"])
                # Older files predate the Pingora floor (P/B, D/P): compare the ratios they have.
                self.assertEqual({k: computed[k] for k in recorded}, recorded)


if __name__ == "__main__":
    unittest.main()
