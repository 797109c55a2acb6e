"""How long `python app.py search "..."` takes from the shell, start to answer (issue 44 item 9).

    python ops/bench_cli.py [--runs 7] [--workdir DIR] [--json FILE]
    python ops/bench_cli.py --against /tmp/old [--runs 9]   # another checkout, run by turns

Loads the demo into a SQLite database under --workdir (default: instance/bench-cli, kept between
runs with its embedding cache), runs the command once to warm that cache, then --runs times,
each in a fresh interpreter exactly as a person at the shell would, and prints the median wall
clock and CPU time (user + sys of the child). Each run is timed twice over: as the environment
has it, and with PYTHONDONTWRITEBYTECODE set (the machines of this project set it, so every
run compiles the project's own modules from source again). On a shared machine the wall clock
also measures the other processes; the load average is printed. Last, `-X importtime` says
which of the command's imports cost the most (cumulative, microseconds), where to look next.

`--against DIR`: another checkout of the project (`git worktree add /tmp/old <commit>`), timed
by turns with this one (this, the other, this, ...: a shared machine's speed drifts within
minutes, so two sets run one after the other compare the host as much as the code), each tree in
its own workdir (DIR/instance/bench-cli: its own database and cache, made by its own load-demo),
with this interpreter and the environment as it is.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUERY = "devlopmental screning"


def run_once(env: dict[str, str], root: Path = ROOT) -> tuple[float, float]:
    """(wall s, CPU s) of one `app.py search` of the checkout at `root` in a fresh interpreter."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "app.py", "search", QUERY], cwd=root, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def median_of(runs: int, env: dict[str, str]) -> dict[str, float]:
    samples = [run_once(env) for _ in range(runs)]
    return {"wall_s": statistics.median(s[0] for s in samples), "cpu_s": statistics.median(s[1] for s in samples)}


def heaviest_imports(env: dict[str, str], top: int = 12) -> list[tuple[str, int]]:
    """The `top` imports of largest cumulative time, top-level and their first level."""
    done = subprocess.run([sys.executable, "-X", "importtime", "app.py", "search", QUERY], cwd=ROOT, env=env,
                          check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|")
        if cumulative.strip().isdigit() and len(name) - len(name.lstrip()) <= 3:
            rows.append((name.strip(), int(cumulative)))
    return sorted(rows, key=lambda row: -row[1])[:top]


def demo_env(workdir: Path, root: Path = ROOT) -> dict[str, str]:
    """The environment of a search of the checkout at `root` on the demo in `workdir`, which
    that checkout's `load-demo` makes the first time."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{workdir / 'bench.db'}", CACHE_DIR=str(workdir / "cache"))
    if not (workdir / "bench.db").exists():
        subprocess.run([sys.executable, "app.py", "load-demo"], cwd=root, env=env, check=True,
                       stdout=subprocess.DEVNULL)
    run_once(env, root)  # the query's embedding, cached
    return env


def by_turns(runs: int, other: Path) -> dict[str, dict[str, float]]:
    """Median wall and CPU of `runs` searches of this checkout and of `other`, run by turns."""
    trees = {"this": (ROOT, demo_env(ROOT / "instance" / "bench-cli")),
             "other": (other, demo_env(other / "instance" / "bench-cli", other))}
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    for _ in range(runs):
        for name, (root, env) in trees.items():
            samples[name].append(run_once(env, root))
    return {name: {"wall_s": statistics.median(s[0] for s in runs_),
                   "cpu_s": statistics.median(s[1] for s in runs_)} for name, runs_ in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--workdir", type=Path, default=ROOT / "instance" / "bench-cli")
    parser.add_argument("--against", type=Path, help="another checkout, timed by turns with this one")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.against:
        result = {"runs": args.runs, "against": str(args.against), **by_turns(args.runs, args.against.resolve()),
                  "load_average": os.getloadavg()}
        for name in ("this", "other"):
            print(f"app.py search, {name} checkout: median wall {result[name]['wall_s']:.2f} s, "
                  f"CPU {result[name]['cpu_s']:.2f} s ({args.runs} runs by turns)")
        print("load average:", " ".join(f"{x:.2f}" for x in result["load_average"]))
        if args.json:
            args.json.write_text(json.dumps(result, indent=2))
        return
    env = demo_env(args.workdir)
    cached_bytecode = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    run_once(cached_bytecode)  # writes the bytecode the next runs read
    result = {
        "runs": args.runs,
        "load_average": os.getloadavg(),
        "bytecode_cached": median_of(args.runs, cached_bytecode),
        "no_bytecode_written": median_of(args.runs, dict(env, PYTHONDONTWRITEBYTECODE="1")),
        "heaviest_imports_us": heaviest_imports(env),
    }
    for label in ("bytecode_cached", "no_bytecode_written"):
        figures = result[label]
        print(f"app.py search, {label}: median wall {figures['wall_s']:.2f} s, CPU {figures['cpu_s']:.2f} s "
              f"({args.runs} runs)")
    print("load average:", " ".join(f"{x:.2f}" for x in result["load_average"]))
    for name, cumulative in result["heaviest_imports_us"]:
        print(f"  {cumulative / 1e6:6.3f} s  {name}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
