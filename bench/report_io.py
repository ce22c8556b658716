"""Reads a benchmark report (bench.proto JSON from `cake bench --json` or
`bench/peers.py --json`), plain or gzip-compressed: the suite reports under
bench/results are kept as REPORT.json.gz but for the newest."""
import gzip
import json


def load_report(path):
    """The report at `path` as a dict; a path ending in .gz is read through gzip."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)
