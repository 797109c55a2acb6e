"""Deterministic train/held-out splits of test cases.

A case's side is decided by a hash of (seed, query), not by shuffling a list: adding or
editing other cases never moves an existing case across the split, so the held-out set stays
held out as the suite grows.
"""
from __future__ import annotations

import hashlib
from typing import Sequence, TypeVar

from catalog.records import CaseRecord

C = TypeVar("C", bound=CaseRecord)
BUCKETS = 10_000


def bucket(seed: int, query: str) -> float:
    digest = hashlib.sha256(f"{seed}\x00{query}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % BUCKETS / BUCKETS


def holdout_split(cases: Sequence[C], holdout: float, seed: int) -> tuple[list[C], list[C]]:
    """(train, held_out): a case is held out when its hash bucket falls below `holdout`."""
    if not 0.0 <= holdout < 1.0:
        raise ValueError(f"holdout must be in [0, 1), not {holdout}")
    train, held = [], []
    for case in cases:
        (held if bucket(seed, case.query) < holdout else train).append(case)
    return train, held


def hash_folds(cases: Sequence[C], folds: int, seed: int) -> list[int]:
    """Each case's cross-validation fold: a hash of (seed, query), stable as cases are added."""
    return [int(bucket(seed + 1, c.query) * folds) for c in cases]


def k_folds(cases: Sequence[C], folds: int, seed: int) -> list[tuple[list[C], list[C]]]:
    """(fit, held) cross-validation folds inside a training split (search.fitting); a case's fold
    is a hash of (seed, query), stable as cases are added (hash_folds)."""
    assignment = hash_folds(cases, folds, seed)
    return [([c for c, a in zip(cases, assignment) if a != f], [c for c, a in zip(cases, assignment) if a == f])
            for f in range(folds)]
