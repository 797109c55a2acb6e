"""ops/slow_kind.sh: a command run as on the slow AMD EPYC kind (issue 44 item 9; docs/architecture.md,
"Where item 9 stands"). What it promises and a test can hold without timing anything: the command
runs in a cgroup of its own whose cpu.shares give it SLOW_KIND_SHARE of each CPU against the busy
loops (one pinned to each CPU), its exit status is the command's, and nothing of it is left after:
no cgroup, no loop. Bad input is refused with a message."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from settings import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "ops" / "slow_kind.sh"
CPU_CGROUPS = Path("/sys/fs/cgroup/cpu")
HOG = "while :; do :; done"
# one worker runs them one after the other: each compares what is left with what was there before
pytestmark = pytest.mark.xdist_group("slow-kind")


def _can_make_cpu_cgroups() -> bool:
    """Whether this process may make a cgroup under the v1 cpu controller (root with it mounted
    writable: a container may show the directory writable and still refuse)."""
    probe = CPU_CGROUPS / f"taskfinder-probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
        return True
    except OSError:
        return False


@pytest.fixture
def cpu_cgroups():
    if not _can_make_cpu_cgroups():
        pytest.skip("needs root and the cgroup v1 cpu controller")


def run(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=60)


def own_group_shares() -> str:
    """A command that prints its cpu cgroup, that group's cpu.shares, the loops' cpu.shares, and
    the CPU each loop is pinned to."""
    return ('g=$(grep ":cpu:" /proc/self/cgroup | cut -d: -f3); '
            f'echo "$g"; cat "{CPU_CGROUPS}$g/cpu.shares"; cat "{CPU_CGROUPS}$g/../hog/cpu.shares"; '
            f'for p in $(cat "{CPU_CGROUPS}$g/../hog/cgroup.procs"); do taskset -cp "$p" | sed "s/.*: //"; done')


def leftovers() -> tuple[list[str], int]:
    groups = [p.name for p in CPU_CGROUPS.glob("taskfinder-slow-*")]
    hogs = subprocess.run(["pgrep", "-fc", HOG], capture_output=True, text=True).stdout.strip()
    return groups, int(hogs or 0)


def test_bad_input_is_refused_with_a_message():
    done = run()
    assert done.returncode == 2 and "usage" in done.stderr
    done = run("true", SLOW_KIND_SHARE="1.5")
    assert done.returncode == 2 and "SLOW_KIND_SHARE" in done.stderr and "1.5" in done.stderr


def test_the_command_runs_in_its_own_group_with_the_share_and_nothing_is_left_after(cpu_cgroups):
    before = leftovers()
    many = run("sh", "-c", own_group_shares())
    assert many.returncode == 0, many.stderr
    group, shares, hog, *pinned = many.stdout.split()
    assert group.startswith("/taskfinder-slow-") and group.endswith("/command")
    cpus = len(os.sched_getaffinity(0))
    assert sorted(int(cpu) for cpu in pinned) == sorted(os.sched_getaffinity(0))   # one loop on each CPU
    # per CPU the command's weight (its shares spread over every CPU it keeps busy) against the
    # loops' (theirs spread over every CPU, one loop each) is 0.4 : 0.6
    assert int(shares) / (int(shares) + int(hog)) == pytest.approx(0.4, abs=0.01)
    one = run("--one-thread", "sh", "-c", own_group_shares())
    _, shares, hog, *_ = one.stdout.split()
    assert int(shares) / (int(shares) + int(hog) / cpus) == pytest.approx(0.4, abs=0.01)
    half = run("sh", "-c", own_group_shares(), SLOW_KIND_SHARE="0.5")
    _, shares, hog, *_ = half.stdout.split()
    assert int(shares) == int(hog)
    assert leftovers() == before


def test_its_exit_status_is_the_commands(cpu_cgroups):
    before = leftovers()
    assert run("sh", "-c", "exit 7").returncode == 7
    assert leftovers() == before
