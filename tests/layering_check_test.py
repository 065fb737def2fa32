"""The layering check finds what it must: a test of tests/layering_check.py on small trees."""

import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import layering_check  # noqa: E402


def tree(files: dict[str, str]) -> Path:
    root = Path(tempfile.mkdtemp())
    for layer in layering_check.ALLOWED:
        (root / layer).mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


class LayeringCheck(unittest.TestCase):
    def test_downward_includes_pass(self) -> None:
        root = tree({"workloads/a.cc": '#include "runtime/engine.h"\n#include "topology/graph.h"\n',
                     "sim/flow/b.h": '#include "sim/sim_world.h"\n#include "workloads/c.h"\n'})
        self.assertEqual(layering_check.check(root), [])

    def test_an_upward_include_is_named(self) -> None:
        root = tree({"runtime/a.cc": '#include "runtime/x.h"\n#include "real/epoll_loop.h"\n'})
        problems = layering_check.check(root)
        self.assertEqual(len(problems), 1)
        self.assertIn("runtime/a.cc:2", problems[0])
        self.assertIn("real/epoll_loop.h", problems[0])

    def test_sideways_between_worlds_is_named(self) -> None:
        root = tree({"sim/a.cc": '#include "launch/peer.h"\n'})
        self.assertEqual(len(layering_check.check(root)), 1)

    def test_world_headers_and_clocks_in_the_runtime_are_named(self) -> None:
        root = tree({"policies/p.cc": "#include <sys/socket.h>\n"
                                      "auto t = std::chrono::steady_clock::now();\n"
                                      "// steady_clock::now() in a comment is fine\n",
                     "workloads/g.cc": "#include <cuda_runtime.h>\n#include \"ns3/core-module.h\"\n"})
        problems = layering_check.check(root)
        self.assertEqual(len(problems), 4, problems)
        self.assertTrue(any("policies/p.cc:2" in p and "clock" in p for p in problems))

    def test_the_repository_keeps_the_rules(self) -> None:
        self.assertEqual(layering_check.check(Path(__file__).resolve().parent.parent), [])


if __name__ == "__main__":
    unittest.main()
