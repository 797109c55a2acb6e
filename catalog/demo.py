"""Where the demo Head Start catalog ships: 200 tasks and their test cases (JSON Lines), loaded by
`python app.py load-demo` and used by the benchmarks and the shipped-default derivation; and
its ranker fit with the vectors its index needs (search.shipped), which `load-demo` installs
instead of fitting for half a minute."""
from pathlib import Path

DEMO_DIR = Path(__file__).resolve().parent / "data"
DEMO_CATALOG = DEMO_DIR / "headstart_catalog.jsonl"
DEMO_CASES = DEMO_DIR / "headstart_cases.jsonl"
DEMO_FIT = DEMO_DIR / "headstart_fit.json"          # python -m search.shipped write
DEMO_VECTORS = DEMO_DIR / "headstart_vectors.npz"
