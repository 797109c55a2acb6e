#!/usr/bin/env bash
# Run a command as on the slow AMD EPYC kind of issue 44 item 9 (family 25, no AVX-512), whose
# every core gave us ~40% of what a core of our Zen 5 VM gives: a busy loop pinned to each CPU
# takes the rest. Linux's CFS shares time on each CPU between two cgroups (cgroup v1 `cpu`
# controller) by their cpu.shares: the loops' group holds HOG_SHARES, the command's group a
# share that leaves it SLOW_KIND_SHARE (0.4) of each CPU it runs on. Waits (sleeps, timeouts, a
# browser's typing pace) stay as long as they are, as on the real machine.
#
#   bash ops/slow_kind.sh make test                  # a command of many busy threads
#   bash ops/slow_kind.sh --one-thread python app.py search "kids shots"
#
# CFS splits a group's shares over the CPUs it has runnable threads on, so the share holds
# exactly when the command keeps every CPU busy (the suite's three workers on two cores) or, with
# --one-thread, when it runs one busy thread; a one-thread phase of a many-thread command gets more
# (57% on two CPUs). Calibration (docs/architecture.md, "Where item 9 stands"): `make test` of
# f7b4e9d took 551 s here on the Zen 5 VM, against 591 and 605 s on the slow kind itself.
# Run as root; needs the cgroup v1 cpu controller at /sys/fs/cgroup/cpu (our machines have both).
set -euo pipefail
share="${SLOW_KIND_SHARE:-0.4}"
one_thread=0
if [ "${1:-}" = "--one-thread" ]; then one_thread=1; shift; fi
[ $# -gt 0 ] || { echo "usage: $0 [--one-thread] COMMAND..." >&2; exit 2; }
root=/sys/fs/cgroup/cpu

HOG_SHARES=600
# One line: the command's cpu.shares, then the CPUs this process may run on (not `nproc`: it reads
# OMP_NUM_THREADS, which the tests set to 1). Per CPU, the command's weight against the loops'
# (HOG_SHARES spread over every CPU) is share : 1 - share; with --one-thread its shares stay on
# one CPU, the loops' still spread over all.
plan=$(python3 -c "import os, sys
s, h, one = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == '1'
cpus = sorted(os.sched_getaffinity(0))
assert 0 < s < 1
print(max(2, round((h / len(cpus) if one else h) * s / (1 - s))), *cpus)" \
    "$share" "$HOG_SHARES" "$one_thread" 2>/dev/null) || plan=""
read -r shares cpu_ids_line <<< "$plan" || true
[ -n "$cpu_ids_line" ] ||
    { echo "error: SLOW_KIND_SHARE must be a number between 0 and 1, not '$share'" >&2; exit 2; }
cpu_ids=($cpu_ids_line)
cpus=${#cpu_ids[@]}
group="$root/taskfinder-slow-$$"
mkdir -p "$group/hog" "$group/command" 2>/dev/null ||
    { echo "error: cannot make a cgroup under $root (needs root and the cgroup v1 cpu controller)" >&2; exit 2; }
echo "$HOG_SHARES" > "$group/hog/cpu.shares"
echo "$shares" > "$group/command/cpu.shares"

hogs=()
cleanup() {
    kill "${hogs[@]}" 2>/dev/null || true
    wait "${hogs[@]}" 2>/dev/null || true
    for pid in $(cat "$group/command/cgroup.procs" 2>/dev/null); do echo "$pid" > "$root/cgroup.procs" || true; done
    # a killed loop leaves its cgroup a moment after `wait` returns: try again for up to 2 s
    for _ in $(seq 40); do
        rmdir "$group/hog" "$group/command" "$group" 2>/dev/null || true
        [ -d "$group" ] || return 0
        sleep 0.05
    done
    echo "warning: could not remove $group" >&2
}
trap cleanup EXIT
for cpu in "${cpu_ids[@]}"; do
    taskset -c "$cpu" sh -c 'while :; do :; done' &
    hogs+=("$!")
    echo "$!" > "$group/hog/cgroup.procs"
done
echo "slow kind: $cpus CPUs, the command's share of each $share (cpu.shares $shares against $HOG_SHARES)" >&2
# the command runs in a child shell moved into the group first, so every process it starts is there
bash -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' slow-kind "$group/command" "$@"
