"""The soak's pure parts: answer classes (HTTP, WebSocket upgrades, gRPC), allowances and bounds,
the WebSocket and gRPC verdicts, the flatness rule, the fault schedule and the reload generations
(bench/tollgate_soak/)."""

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tollgate_soak import account, driver, gwconfig, plan, sessions  # noqa: E402
from tollgate_soak.account import TenantTally  # noqa: E402


class Classify(unittest.TestCase):
    def test_admissions_by_who_decided(self):
        self.assertEqual(account.classify(200, {"ratelimit-policy": "x"}, ""),
                         account.REDIS_ADMITTED)
        self.assertEqual(account.classify(
            200, {"ratelimit-policy": "x;degraded", "tollgate-degraded": "redis"}, ""),
            account.LOCAL_ADMITTED)
        self.assertEqual(account.classify(200, {}, ""), account.OPEN_ADMITTED)

    def test_a_503_is_declared_only_as_the_capacity_problem_with_retry_after(self):
        body = '{"type":"https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"}'
        self.assertEqual(account.classify(503, {"retry-after": "1"}, body), account.DECLARED_503)
        self.assertEqual(account.classify(503, {}, body), account.UNDECLARED_5XX)
        self.assertEqual(account.classify(503, {"retry-after": "1"}, "{}"),
                         account.UNDECLARED_5XX)
        self.assertEqual(account.classify(502, {}, ""), account.UNDECLARED_5XX)
        self.assertEqual(account.classify(429, {}, ""), account.LIMITED)
        self.assertEqual(account.classify(401, {}, ""), account.UNAUTHENTICATED)
        self.assertEqual(account.classify(404, {}, ""), account.OTHER)

    def test_a_websocket_upgrade_answered_101_is_an_admission_like_a_200(self):
        self.assertEqual(account.classify(101, {"ratelimit-policy": "x"}, ""),
                         account.REDIS_ADMITTED)
        self.assertEqual(account.classify(
            101, {"ratelimit-policy": "x", "tollgate-degraded": "redis"}, ""),
            account.LOCAL_ADMITTED)
        self.assertEqual(account.classify(101, {}, ""), account.OPEN_ADMITTED)

    def test_a_concurrency_refusal_is_told_by_its_policy(self):
        self.assertTrue(account.concurrency_refusal(
            {"ratelimit-policy": '"local.concurrency";q=8'}))
        self.assertFalse(account.concurrency_refusal({"ratelimit-policy": '"local";q=21;w=126'}))
        self.assertFalse(account.concurrency_refusal({}))


class ClassifyGrpc(unittest.TestCase):
    GW = {"x-request-id": "r1"}

    def test_ok_is_an_admission_by_who_decided(self):
        c = account.classify_grpc
        self.assertEqual(c("OK", {**self.GW, "ratelimit-policy": "x"}), account.REDIS_ADMITTED)
        self.assertEqual(c("OK", {**self.GW, "ratelimit-policy": "x", "tollgate-degraded": "r"}),
                         account.LOCAL_ADMITTED)
        self.assertEqual(c("OK", self.GW), account.OPEN_ADMITTED)

    def test_the_gateways_refusals(self):
        c = account.classify_grpc
        self.assertEqual(c("RESOURCE_EXHAUSTED", self.GW), account.LIMITED)
        self.assertEqual(c("UNAUTHENTICATED", self.GW), account.UNAUTHENTICATED)
        self.assertEqual(c("UNAVAILABLE", {**self.GW, "retry-after": "1"}),
                         account.DECLARED_503)
        self.assertEqual(c("UNAVAILABLE", self.GW), account.GRPC_UNAVAILABLE)

    def test_failures_no_gateway_answered(self):
        c = account.classify_grpc
        self.assertEqual(c("UNAVAILABLE", {}), account.GRPC_TRANSPORT)
        self.assertEqual(c("DEADLINE_EXCEEDED", {}), account.GRPC_NO_ANSWER)
        self.assertEqual(c("DEADLINE_EXCEEDED", self.GW), account.OTHER)
        self.assertEqual(c("INTERNAL", {}), account.OTHER)
        self.assertEqual(c("PERMISSION_DENIED", self.GW), account.OTHER)


class Verdicts(unittest.TestCase):
    def ws(self, **kw):
        counts = {k: 0 for k in account.WS_COUNTERS}
        counts.update(attempted=10, opened=4, refused=5, other_answer=1, closed=3, dropped=1)
        counts.update(kw)
        return counts

    def test_websockets_pass_with_sessions_opened_none_failed_and_none_left_open(self):
        ok, detail = account.ws_verdict(self.ws(), {"open": 0})
        self.assertTrue(ok, detail)
        self.assertIn("4 opened (101)", detail)
        self.assertTrue(account.ws_verdict(self.ws(broken_by_kill=2), {"open": 0})[0])
        self.assertFalse(account.ws_verdict(self.ws(failed=1), {"open": 0})[0])
        self.assertFalse(account.ws_verdict(self.ws(lost=1), {"open": 0})[0])
        self.assertFalse(account.ws_verdict(self.ws(), {"open": 1})[0])
        self.assertFalse(account.ws_verdict(self.ws(), None)[0])
        self.assertFalse(account.ws_verdict(self.ws(opened=0), {"open": 0})[0])
        self.assertTrue(account.ws_verdict(self.ws(attempted=0, opened=0), {"open": 0})[0])

    def test_grpc_unavailable_passes_only_in_a_fault_window(self):
        counts = {account.REDIS_ADMITTED: 5, account.LIMITED: 3, account.DECLARED_503: 2,
                  account.GRPC_UNAVAILABLE: 1}
        ok, detail = account.grpc_verdict(counts, [12.0], 0, [(10.0, 15.0)])
        self.assertTrue(ok, detail)
        self.assertIn("11 calls: 5 OK, 3 RESOURCE_EXHAUSTED, 2 UNAVAILABLE declared", detail)
        self.assertFalse(account.grpc_verdict(counts, [16.0], 0, [(10.0, 15.0)])[0])
        self.assertFalse(account.grpc_verdict(counts, [], 1, [])[0])
        self.assertFalse(account.grpc_verdict({account.LIMITED: 3}, [], 0, [])[0])
        self.assertTrue(account.grpc_verdict({}, [], 0, [])[0])

    def test_upstream_gauges_of_every_upstream_unset_is_zero_no_metrics_is_none(self):
        m = {'tollgate_upstream_in_flight{upstream="echo"}': 2.0,
             'tollgate_upstream_queue_depth{upstream="echo"}': 0.0}
        g = driver.upstream_gauges(m)
        self.assertEqual(set(g), {"echo", "ws", "grpc"})
        self.assertEqual(g["echo"], {"in_flight": 2.0, "queue_depth": 0.0})
        self.assertEqual(g["grpc"], {"in_flight": 0, "queue_depth": 0})
        self.assertEqual(driver.upstream_gauges({})["ws"], {"in_flight": None,
                                                             "queue_depth": None})


class Bounds(unittest.TestCase):
    def test_allowance_is_burst_plus_refill_over_the_span(self):
        self.assertAlmostEqual(account.allowance(20, 600, 3600, 60), 30.0)
        self.assertEqual(account.allowance(20, 600, 3600, -5), 20)

    def test_over_counts_whole_tokens_beyond_the_floor_of_the_bound(self):
        self.assertEqual(account.over(30, 30.0), 0)
        self.assertEqual(account.over(31, 30.0), 1)
        self.assertEqual(account.over(31, 30.99), 1)
        self.assertEqual(account.over(5, 30.0), 0)

    def test_local_bound_is_fresh_shares_plus_the_fleets_refill(self):
        # 4 episodes of floor(21 / 3) = 7, three instances at 200/h each for 36 s: 6 tokens.
        self.assertAlmostEqual(account.local_bound(21, 600, 3600, 36, 3, 4), 28 + 6)
        # a share is at least 1 token and 1 per period
        self.assertAlmostEqual(account.local_bound(2, 2, 3600, 0, 3, 5), 5)


def tally(span, **counts):
    t = TenantTally()
    t.add(account.LIMITED, 100.0, 100.0 + span)
    t.counts = dict(counts)
    return t


class TenantOvers(unittest.TestCase):
    LIMITS = {
        "c": ("exact", 20, 600, 3600.0, "closed"),
        "l": ("local", 21, 600, 3600.0, "local"),
        "a": ("anonymous", 10, 60, 60.0, "open"),
    }

    def rows(self, tallies, episodes=3):
        return {r["tenant"]: r for r in account.tenant_overs(tallies, self.LIMITS, 3, episodes)}

    def test_closed_tier_counts_every_admission(self):
        r = self.rows({"c": tally(60, redis_admitted=30)})["c"]
        self.assertEqual((r["admitted"], r["over"]), (30, 0))
        r = self.rows({"c": tally(60, redis_admitted=30, local_admitted=1)})["c"]
        self.assertEqual(r["over"], 1)

    def test_local_tier_redis_part_is_strict_and_local_part_is_bounded(self):
        # allowance 21 + 10 = 31; local bound 3 x 7 + 10 = 31
        r = self.rows({"l": tally(60, redis_admitted=31, local_admitted=31)})["l"]
        self.assertEqual(r["over"], 0)
        r = self.rows({"l": tally(60, redis_admitted=32)})["l"]
        self.assertEqual(r["over"], 1)
        r = self.rows({"l": tally(60, redis_admitted=20, local_admitted=43)})["l"]
        self.assertEqual(r["over"], 1)

    def test_open_admits_are_not_bounded_but_redis_admits_are(self):
        r = self.rows({"a": tally(60, redis_admitted=70, open_admitted=500)})["a"]
        self.assertEqual(r["over"], 0)
        r = self.rows({"a": tally(60, redis_admitted=71)})["a"]
        self.assertEqual(r["over"], 1)

    def test_tally_span_runs_from_first_send_to_last_answer(self):
        t = TenantTally()
        t.add(account.REDIS_ADMITTED, 5.0, 5.2)
        t.add(account.LIMITED, 3.0, 9.5)
        self.assertEqual((t.span(), t.n(account.REDIS_ADMITTED, account.LIMITED)), (6.5, 2))
        c = t.copy()
        t.add(account.LIMITED, 10.0, 11.0)
        self.assertEqual((c.span(), c.n(account.LIMITED)), (6.5, 1))


class Flat(unittest.TestCase):
    def test_quarters_and_the_flatness_rule(self):
        self.assertIsNone(account.quarters([1, 2, 3]))
        self.assertEqual(account.quarters([1, 1, 5, 5, 5, 5, 9, 9]), (1, 9))
        ok, _ = account.flat([100] * 4 + [170] * 4, [50] * 8)
        self.assertTrue(ok)  # 170 <= 1.5 x 100 + 24
        ok, _ = account.flat([100] * 4 + [180] * 4, [50] * 8)
        self.assertFalse(ok)
        ok, _ = account.flat([100] * 8, [50] * 4 + [99] * 4)
        self.assertFalse(ok)
        ok, detail = account.flat([100, 900], [1, 2])
        self.assertTrue(ok)
        self.assertIn("not judged", detail)

    def test_windows(self):
        self.assertTrue(account.in_window(5, [(1, 2), (4, 6)]))
        self.assertFalse(account.in_window(3, [(1, 2), (4, 6)]))


class Schedule(unittest.TestCase):
    def test_three_minutes_compress_the_schedule_into_two_periods(self):
        self.assertEqual(plan.schedule(180), [
            (9.9, "backend", 0), (22.5, "freeze", None), (35.1, "gateway", 0),
            (90.0, "failover", None), (99.9, "backend", 1), (112.5, "freeze", None),
            (125.1, "gateway", 1)])

    def test_an_hour_has_a_failover_every_five_minutes_and_a_quiet_end(self):
        events = plan.schedule(3600)
        failovers = [at for at, kind, _ in events if kind == "failover"]
        self.assertEqual(failovers, [300.0 * k for k in range(1, 12)])
        self.assertEqual(sum(1 for e in events if e[1] == "gateway"), 12)
        self.assertTrue(all(at <= 3600 - plan.QUIET_END_S for at, _, _ in events))
        self.assertEqual({arg for _, k, arg in events if k == "gateway"}, {0, 1, 2})


class Generations(unittest.TestCase):
    def test_churn_settings_fill_in_the_same_time_and_the_account_takes_the_larger(self):
        times = {burst / limit for limit, burst in gwconfig.CHURN_SETTINGS}
        self.assertEqual(len(times), 1)
        self.assertEqual(gwconfig.churn_max(), (900, 30))
        self.assertEqual(gwconfig.tenant_limits()["t170"][1:3], (30, 900))

    def test_rotating_keys_exist_in_even_generations_only(self):
        self.assertTrue(plan.key_present(195, 0))
        self.assertFalse(plan.key_present(195, 1))
        self.assertTrue(plan.key_present(5, 1))
        g1 = gwconfig.gateway_yaml(1, 1, 2, [3, 4, 5], "m", ["127.0.0.1:6", "127.0.0.1:7"],
                                   "127.0.0.1:8", "127.0.0.1:9")
        self.assertNotIn('tenant: "t195"', g1)
        self.assertIn('tenant: "t189"', g1)
        self.assertIn('backends: ["127.0.0.1:7", "127.0.0.1:6"]', g1)

    def test_websocket_and_grpc_routes_go_to_their_own_upstreams(self):
        g = gwconfig.gateway_yaml(0, 1, 2, [3, 4, 5], "m", ["127.0.0.1:6", "127.0.0.1:7"],
                                  "127.0.0.1:8", "127.0.0.1:9")
        self.assertIn('{ path_prefix: "/ws", upstream: ws, auth: required }', g)
        self.assertIn('{ path_prefix: "/demo.Echo/", upstream: grpc, auth: required }', g)
        grpc_block = g.split("  grpc:\n", 1)[1].split("routes:", 1)[0]
        self.assertIn('backends: ["127.0.0.1:9"]', grpc_block)
        self.assertIn("h2: true", grpc_block)
        self.assertTrue(sessions.GRPC_METHOD.startswith("/demo.Echo/"))


class Mix(unittest.TestCase):
    def test_websocket_scripts_stay_in_their_ranges_and_some_drop_mid_way(self):
        import random

        rng = random.Random(3)
        scripts = [sessions.ws_script(rng) for _ in range(400)]
        self.assertTrue(all(2 <= m <= 4 and 0.1 <= p <= 0.3 for m, _, p in scripts))
        drops = sum(1 for _, d, _ in scripts if d is not None)
        self.assertTrue(40 < drops < 160, drops)


if __name__ == "__main__":
    unittest.main()
