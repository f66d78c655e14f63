"""The fleet-size arithmetic of the Redis capacity run (bench/tollgate_bench/capacity.py), pure."""

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tollgate_bench.capacity import calls_per_admission, fleet_table  # noqa: E402


class CallsPerAdmission(unittest.TestCase):
    def test_a_busy_tenant_costs_one_call_per_lease(self):
        # 1000 req/s x 0.25 s = 250 >= 100 tokens: every lease used up, nothing given back.
        self.assertAlmostEqual(calls_per_admission(1000, 100, 0.25), 0.01)

    def test_a_slow_tenant_pays_the_give_back(self):
        # 10 req/s x 0.25 s = 2.5 requests per lease, then the rest goes back: 2 calls.
        self.assertAlmostEqual(calls_per_admission(10, 100, 0.25), 2 / 2.5)

    def test_a_very_slow_tenant_costs_two_calls_per_request(self):
        self.assertEqual(calls_per_admission(1, 100, 0.25), 2.0)


class FleetTable(unittest.TestCase):
    def test_exact_and_leased_fleet_sizes(self):
        (row,) = fleet_table(50_000, 40_000, 100, 0.25, [10_000], [1])
        self.assertAlmostEqual(row["exact_instances"], 5.0)
        self.assertAlmostEqual(row["leased_instances"], 40_000 / (10_000 * 0.01))
        rows = fleet_table(50_000, 40_000, 100, 0.25, [1000, 2000], [1, 100])
        self.assertEqual([(r["instance_rps"], r["tenants"]) for r in rows],
                         [(1000, 1), (1000, 100), (2000, 1), (2000, 100)])


if __name__ == "__main__":
    unittest.main()
