"""Where the demo Head Start catalog ships: 200 tasks and their test cases (JSON Lines), loaded by
`python app.py load-demo` and used by the benchmarks and the shipped-default derivation."""
from pathlib import Path

DEMO_DIR = Path(__file__).resolve().parent / "data"
DEMO_CATALOG = DEMO_DIR / "headstart_catalog.jsonl"
DEMO_CASES = DEMO_DIR / "headstart_cases.jsonl"
