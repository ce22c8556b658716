"""What the tests of the bench/ scripts share: loading a script as a module,
and collecting failed checks to report them all at the end."""
import importlib.util
import os
import sys


def load_bench_script(root, name):
    """bench/NAME.py of the repository at `root`, as a module."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(root, "bench", name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Checks:
    """check(name, ok, detail) records a failed check; finish() prints them and
    exits 1 if there was one, else 0."""

    def __init__(self, title):
        self.title = title
        self.failures = []

    def __call__(self, name, ok, detail=""):
        if not ok:
            self.failures.append(f"{name}: {detail}")

    def finish(self):
        for f in self.failures:
            print("FAIL", f)
        print(f"{self.title}: {len(self.failures)} failure(s)")
        sys.exit(1 if self.failures else 0)
