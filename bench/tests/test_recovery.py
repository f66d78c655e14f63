"""bench/recovery.py's arithmetic (tollgate_bench.recovery_account), without processes."""

import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from tollgate_bench import recovery_account as account  # noqa: E402


class Plan(unittest.TestCase):
    def test_outages_last_two_and_a_half_windows_with_healthy_windows_between(self):
        p = account.plan(2, 2, 3)
        self.assertEqual(p.outages, [(2.0, 7.0), (13.0, 18.0)])
        self.assertEqual(p.end_s, 24.0)


class Figures(unittest.TestCase):
    def answers(self, extra_after):
        """Admitted at 10/s (the limit of 20 per 2 s) over 24 s, degraded during the outages,
        and `extra_after` more admitted right after each one."""
        p = account.plan(2, 2, 3)
        rows = []
        for i in range(240):
            at = i / 10
            degraded = any(a <= at < u for a, u in p.outages)
            rows.append((at, True, degraded))
        for _, until in p.outages:
            rows += [(until + 0.01, True, False)] * extra_after
        return p, sorted(rows)

    def test_a_steady_tenant_is_within_the_bound(self):
        p, rows = self.answers(0)
        f = account.figures(p, 2, {"t": rows}, 24.0)
        t = f["tenants"]["t"]
        self.assertEqual(t["admitted"], 240)
        self.assertEqual(t["allowance"], 260.0)
        self.assertTrue(f["within_bound"])
        self.assertEqual([a["back_s"] for a in t["after_outages"]], [7.0, 18.0])
        self.assertEqual(t["after_outages"][1]["excess"], 0.0)

    def test_a_fresh_burst_after_each_outage_shows_and_too_many_exceed_the_bound(self):
        p, rows = self.answers(20)
        f = account.figures(p, 2, {"t": rows}, 24.0)
        self.assertEqual([a["excess"] for a in f["tenants"]["t"]["after_outages"]], [20.0, 20.0])
        self.assertTrue(f["within_bound"])
        self.assertEqual(account.figures(p, 2, {"t": rows}, 24.0, gateways=2)["bound"], 76.0)
        p, rows = self.answers(50)
        self.assertFalse(account.figures(p, 2, {"t": rows}, 24.0)["within_bound"])
        self.assertIn("BOUND EXCEEDED", account.report(account.figures(p, 2, {"t": rows}, 24.0)))


if __name__ == "__main__":
    unittest.main()
