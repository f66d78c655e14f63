"""The tool check installs what a fresh machine lacks through scripts/prereqs.sh, or says how."""

import sys
import unittest
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tollgate_bench import results  # noqa: E402
from tollgate_bench.common import BenchError  # noqa: E402


class Done:
    def __init__(self, code):
        self.returncode = code


class CheckTools(unittest.TestCase):
    def test_missing_tools_go_through_prereqs_and_then_pass(self):
        installed = set()
        present = lambda t: t in installed or t in ("redis-server",)
        calls = []

        def run(cmd, cwd=None):
            calls.append(cmd)
            installed.update(("wrk", "nginx"))
            return Done(0)

        with mock.patch.object(results, "_present", present), \
                mock.patch.object(results.shutil, "which", lambda t: "/usr/bin/cargo"):
            results.check_tools(run=run)
        self.assertEqual(len(calls), 1)
        self.assertTrue(calls[0][0].endswith("scripts/prereqs.sh"))
        self.assertEqual(calls[0][1:], ["wrk:wrk", "nginx:nginx-light"])

    def test_without_root_the_error_names_the_install_command(self):
        present = lambda t: t == "redis-server"
        with mock.patch.object(results, "_present", present), \
                mock.patch.object(results.shutil, "which", lambda t: "/usr/bin/cargo"):
            with self.assertRaises(BenchError) as e:
                results.check_tools(run=lambda cmd, cwd=None: Done(1))
        self.assertIn("apt-get install -y wrk nginx-light", str(e.exception))

    def test_nothing_to_do_when_everything_is_there(self):
        with mock.patch.object(results, "_present", lambda t: True), \
                mock.patch.object(results.shutil, "which", lambda t: "/usr/bin/cargo"):
            results.check_tools(run=lambda cmd, cwd=None: self.fail("prereqs run"))


class WriteScriptRun(unittest.TestCase):
    def test_the_run_is_written_under_its_name_and_label_with_the_extra_fields(self):
        import json
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            path, load = results.write_script_run("conns", "after", "bin/tollgate", [{"n": 1}],
                                                  out_dir=d, env={"A": "1"})
            self.assertEqual(path.parent, Path(d))
            self.assertTrue(path.name.startswith("conns-after-") and path.name.endswith(".json"))
            doc = json.loads(path.read_text())
        self.assertEqual(list(doc), ["label", "binary", "env", "date", "loadavg", "rows"])
        self.assertEqual((doc["label"], doc["binary"], doc["env"], doc["rows"]),
                         ("after", "bin/tollgate", {"A": "1"}, [{"n": 1}]))
        self.assertEqual(doc["loadavg"], list(load))


if __name__ == "__main__":
    unittest.main()
