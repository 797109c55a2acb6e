"""learned: the cosine of the query's vector to the task's nearest learned exemplar, a query
people found the task with (learning from use, search.learned: the click model and the rules
that decide which pairs count):

    learned(q, t) = max(floor, max_{e in L_t} cos(q, e))

(learned_signal). Only with a fit that has learned evidence and weighs it, full mode only.
Where its weight is 0 it cannot move the ranking, and the prefilter computes it at the returned
tasks only (`deferred`; search.prefilter.DEFERRABLE). Where some learned exemplars count on
anonymous networks alone, its value over the verified ones (`people_values`, the `trusted`
hook) bounds what they may do (search.prefilter.bound_anonymous, search.learned.anonymous_bounded).

Index time: the learned memory `index.learned` (search.learned.build_learned_memory, with its
vectors from search.assembly.attach_vectors)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from search.learned import LearnedMemory
from search.signal.base import QueryContext, Signal
from search.signals import group_max, grouped_products, segment_offsets


def learned_groups(memory: LearnedMemory, rows: np.ndarray) -> np.ndarray:
    """Per entry of `rows`, its task's group in the memory, -1 for a task without learned
    exemplars (a binary search: build_learned_memory keeps `group_rows` sorted)."""
    at = np.searchsorted(memory.group_rows, rows)
    found = at < memory.group_rows.size
    found[found] = memory.group_rows[at[found]] == rows[found]
    return np.where(found, at, -1)


def learned_values(memory: LearnedMemory, rows: np.ndarray, query_vector: np.ndarray) -> np.ndarray:
    """learned(q, t) of each task in `rows` (formula: learned_signal). With fewer than half of
    the memory's groups wanted (the prefilter's returned tasks, when the signal's weight is 0),
    only their learned exemplars are read (search.signals.grouped_products, the same values)."""
    groups = learned_groups(memory, rows)
    groups = np.sort(groups[groups >= 0])
    if groups.size * 2 >= memory.group_rows.size:
        nearest = group_max(memory.vectors @ query_vector, memory.group_starts, memory.n_tasks, memory.group_rows)
    else:
        ends = np.append(memory.group_starts[1:], len(memory.texts))[groups]
        products = grouped_products(memory.vectors, memory.group_starts[groups], ends, query_vector, whole=True)
        nearest = group_max(products, segment_offsets(ends - memory.group_starts[groups]), memory.n_tasks,
                            memory.group_rows[groups])
    return np.maximum(nearest[rows], memory.floor).astype(np.float64)


def learned_available(memory: LearnedMemory | None, rows: np.ndarray, query_vector: np.ndarray | None) -> bool:
    """Whether the `learned` signal exists for `rows`: a learned memory with vectors, a query
    vector, and at least one task of `rows` with learned exemplars."""
    return (memory is not None and memory.vectors is not None and query_vector is not None
            and bool((learned_groups(memory, rows) >= 0).any()))


def learned_signal(memory: LearnedMemory | None, rows: np.ndarray, query_vector: np.ndarray | None
                   ) -> np.ndarray | None:
    """The `learned` signal of the tasks in `rows` (a nearest-neighbour vote of the queries
    people found each task with):

        learned(q, t) = max(floor, max_{e in L_t} cos(q, e))

    L_t: the task's learned exemplars; floor: the cosine of an unrelated query (memory.floor,
    unrelated_cosine). A task without learned exemplars, or whose are unlike the query, gets the
    floor: use lifts a task only for queries like the ones it was found with. None when there
    is nothing to compute: no learned memory, no vectors, or no visible task with learned
    evidence (then nothing changes, not even the response's fields)."""
    if not learned_available(memory, rows, query_vector):
        return None
    return learned_values(memory, rows, query_vector)


def people_values(memory: LearnedMemory, rows: np.ndarray, query_vector: np.ndarray) -> np.ndarray:
    """learned(q, t) over the verified exemplars alone (learned_signal's formula; the floor for a
    task without any): the `learned` signal as verified people alone would give it."""
    people = memory.people_only()
    if people is None or people.vectors is None or not (learned_groups(people, rows) >= 0).any():
        return np.full(rows.size, memory.floor, dtype=np.float64)
    return learned_values(people, rows, query_vector)


def value(ctx: QueryContext) -> np.ndarray | None:
    return learned_signal(ctx.index.learned, ctx.rows, ctx.query_vector)


def deferred(ctx: QueryContext) -> Callable[[np.ndarray], np.ndarray] | None:
    """Its values at positions of ctx.rows only (learned_values reads only those tasks' learned
    exemplars), where it exists for ctx.rows (learned_available)."""
    memory, rows, query_vector = ctx.index.learned, ctx.rows, ctx.query_vector
    if not learned_available(memory, rows, query_vector):
        return None
    return lambda positions: learned_values(memory, rows[positions], query_vector)


def trusted(ctx: QueryContext) -> np.ndarray | None:
    """Its value over the verified exemplars alone, where some count on anonymous networks alone
    or the index has a trusted counterpart (which holds no learned memory of its own)."""
    memory = ctx.index.learned
    if memory is None or not (memory.anonymous or ctx.index.trusted is not None):
        return None
    return people_values(memory, ctx.rows, ctx.query_vector)


SIGNAL = Signal("learned", "learned",
                "cosine to the task's nearest learned exemplar (queries staff found it with; exists only with a fit "
                "that has learned evidence, full mode only; see docs/learning-from-use.md)", value,
                says="learned from searches",   # only where it added to the score (contributions.learned)
                fit_only=True, deferred=deferred, trusted=trusted)
