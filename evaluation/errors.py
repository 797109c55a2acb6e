"""Error analysis (paper §4.5): every miss (in-scope query, no gold task in the top 5) gets one
class, by the first rule that holds, evaluated on the prefilter's own signal values for the
query (search.fitting.CVQuery over the index built from the TRAINING cases):

1. ``ambiguous``: a gold task is in the shortlist (top K = the ranker's shortlist size) with
   some evidence (a fused score above the catalog's lowest), and either the top result's fused score is within AMBIGUITY_GAP (10%) of that gold task's, i.e.
   (top - gold) / |top| <= 0.10, or the top result has the same catalog category as a gold task.
   The system found the right neighbourhood but could not tell the near-equal tasks apart.
2. ``lexical_gap``: no query word links to any gold task (the gold's lexical, rationale,
   typo and exemplar signals are all 0) AND at least one query word is unknown to both the catalog text and
   the training lexicon (its stem is in neither vocabulary and typo correction finds no
   neighbour): a novel acronym or term the system has never seen.
3. ``missing_rationale``: no query word links to any gold task (as in 2) although every query
   word is known somewhere (catalog or lexicon, possibly after typo correction): the terms
   exist, but no test-case rationale connects them to the gold task.
4. ``embedding_failure``: some query word does link to a gold task, yet both the embedding
   signal alone and the sparse evidence (lexical + rationale + typo) alone rank every gold task
   below 5th: the embedding did not rescue a query whose sparse evidence was too weak.
5. ``fusion``: anything else: one signal alone places a gold task in the top 5 but the fused
   score does not (a weighting problem rather than missing knowledge).

Classes 2 and 3 (and usually 1) are fixed by teaching the query's words to the gold task; each
miss therefore comes with a suggested case: the query, its gold ids and a rationale that reads as
a sentence (`rationale_sentence`): the query as typed, the gold task's name and its help. A miss is
a held-out query, so its own case is never learned from: the admin page
(admin.evaluation_views) adds that sentence to a case the run does learn from.

Each miss also records its ``held_out_words``: the query's words that no task text and no
training case has (their stem is not in the training index's vocabulary; a word typo correction
maps onto a known one counts too: the run never saw it written so). Teaching such a word from the
page would copy the held-out test into the catalog, and the next run would count a query it was
shown as a success (issue 44 item 6: "ouch report" went 0.900 -> 0.925 that way), so the page
offers no one-click fix for such a miss (evaluation.runs.offered_fix).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np

from lexicon.language import STOPWORDS
from lexicon.text import stem, words
from search.index import SearchIndex
from search.query import typo_corrections
from search.signals import unique

from search.fitting import CVQuery
from search.pipeline import Pipeline
from search.prefilter import fuse, mode_of

AMBIGUITY_GAP = 0.10
CLASSES = ("ambiguous", "lexical_gap", "missing_rationale", "embedding_failure", "fusion")


@dataclass(frozen=True)
class Miss:
    query: str
    gold: tuple[str, ...]
    category: str | None
    cls: str
    reason: str
    top: list[str]
    gold_rank: int | None
    unknown_words: list[str]
    suggestion: dict
    held_out_words: list[str]      # words of the query no task text and no training case has


def _rank_of(scores: np.ndarray, row: int) -> int:
    return int(np.count_nonzero(scores > scores[row])) + 1


def rationale_sentence(query: str, gold_tasks) -> str:
    """A rationale that reads as a sentence and links the query's words, in the order the user
    typed them, to its right task(s): '“driver's morning check of the bus before leaving” should
    find Vehicle Inspections: Pre-trip/post-trip checklists and annual inspections.' Its other
    words ("should", "find") are stopwords, so the lexicon learns nothing from them; the task's
    name and first help sentence say what the task is (one task only: several are just named).
    The query is quoted with typographic marks, the page's one kind: a page showing the sentence
    never wraps it in a second pair."""
    names = [task.name for task in gold_tasks]
    sentence = f'“{" ".join(query.split())}” should find ' + (" or ".join(names) if names else "its right task")
    if len(gold_tasks) == 1 and gold_tasks[0].help:
        sentence += ": " + gold_tasks[0].help.split(". ")[0].strip().rstrip(".")
    return sentence + "."


_TYPED_WORD = re.compile(r"[0-9a-z]+(?:['-][0-9a-z]+)*")   # a word as typed ("driver's" is one)


def words_sentence(query: str, gold_tasks) -> str:
    """The rationale a page fix adds: the query's own words one by one, never the held-out query
    itself (issue 44 item 6: copying it into the catalog made the next run pass it), then what
    `rationale_sentence` says of the right task: '“driver's”, “morning”, “check”, “bus” should
    find Vehicle Inspections: Pre-trip/post-trip checklists and annual inspections.' Stopwords
    are left out; every other word links the task, as the query's words did in a sentence."""
    kept = [w for w in dict.fromkeys(_TYPED_WORD.findall(query.casefold())) if w not in STOPWORDS]
    sentence = rationale_sentence(query, gold_tasks)
    tail = sentence[sentence.index("” should find ") + 1:]
    return ", ".join(f"“{w}”" for w in kept) + tail if kept else tail.strip().removeprefix("should find ")


def suggest_case(query: str, gold: tuple[str, ...], category: str | None, tasks_by_id, unlinked: list[str]) -> dict:
    """The test case a miss suggests: its query, gold and `rationale_sentence` (the query holds
    every word that did not link to the gold task, `unlinked`, in its own order)."""
    row = {"query": query, "gold": list(gold),
           "rationale": rationale_sentence(query, [tasks_by_id[g] for g in gold if g in tasks_by_id])}
    if category:
        row["category"] = category
    return row


def classify(index: SearchIndex, block: CVQuery, fused: np.ndarray, ranking: list[str], miss,
             shortlist_size: int, typo_min_similarity: float = 80.0) -> tuple[str, str, list[str], list[str]]:
    """(class, reason, unknown words, unlinked words) for one miss, `miss` being anything with the
    query as typed (`query`) and its gold task ids (`gold`): a QueryRun, or a CaseRecord; see the
    module docstring."""
    query, gold = miss.query, tuple(miss.gold)
    tasks_by_id = {t.id: t for t in index.tasks}
    task_ids = [t.id for t in block.tasks]
    rows = [task_ids.index(g) for g in gold if g in task_ids]
    query_words = unique(words(query))
    corrections = typo_corrections(index, query_words, typo_min_similarity)
    unknown = [w for w in query_words if stem(w) not in index.vocabulary and w not in corrections]
    gold_rows_index = [index.tasks.index(tasks_by_id[g]) for g in gold if g in tasks_by_id]
    unlinked = []
    for w in query_words:
        column = index.vocabulary.get(stem(w))
        linked = column is not None and any(index.lexical[r, column] > 0 or index.rationale[r, column] > 0
                                            for r in gold_rows_index)
        if not linked:
            unlinked.append(w)
    if not rows:
        return "lexical_gap", "gold task is not in the (active) catalog", unknown, unlinked

    shortlist = ranking[:shortlist_size]
    in_shortlist = [g for g in gold if g in shortlist]
    if in_shortlist and ranking:
        top_score = float(fused[task_ids.index(ranking[0])])
        best_gold = max(float(fused[task_ids.index(g)]) for g in in_shortlist)
        gap = (top_score - best_gold) / abs(top_score) if top_score else 0.0
        top_cat = tasks_by_id[ranking[0]].category
        same_cat = top_cat is not None and top_cat in {tasks_by_id[g].category for g in gold}
        has_evidence = best_gold > float(np.min(fused))   # above the score of a task nothing points at
        if has_evidence and (gap <= AMBIGUITY_GAP or same_cat):
            why = f"gold in shortlist, score gap {gap:.0%}" if gap <= AMBIGUITY_GAP else \
                f"gold in shortlist, top result shares category {top_cat!r}"
            return "ambiguous", why, unknown, unlinked

    sparse = sum(block.values[n] for n in ("lexical", "rationale", "typo", "exemplar") if n in block.values)
    evidence = any(float(sparse[r]) > 0 for r in rows)
    if not evidence:
        if unknown:
            return "lexical_gap", f"no link to gold; unknown word(s): {', '.join(unknown)}", unknown, unlinked
        return "missing_rationale", "no query word links to the gold task in catalog text or lexicon", unknown, unlinked
    emb = block.values.get("embedding")
    emb_rank = min(_rank_of(emb, r) for r in rows) if emb is not None else None
    sparse_rank = min(_rank_of(np.asarray(sparse), r) for r in rows)
    if (emb_rank is None or emb_rank > 5) and sparse_rank > 5:
        return ("embedding_failure",
                f"embedding ranks gold {emb_rank if emb_rank is not None else 'n/a'}, sparse evidence ranks it {sparse_rank}",
                unknown, unlinked)
    return "fusion", f"embedding rank {emb_rank}, sparse rank {sparse_rank}, but fused rank > 5", unknown, unlinked


def held_out_words(index: SearchIndex, query: str) -> list[str]:
    """The words of `query` that no task text and no training case has: their stem is not in the
    vocabulary of `index` (built from the catalog and the training cases alone), typo
    corrections notwithstanding (see the module docstring)."""
    return [w for w in unique(words(query)) if stem(w) not in index.vocabulary]


def analyse(pipeline: Pipeline, rows, blocks: dict, use_pins: bool) -> dict:
    """Classify the misses among `rows` (QueryRuns of one configuration). `pipeline`: the
    evaluation's (evaluation.replay.replay_pipeline: the training split's index and fit);
    `blocks`: query -> its held-out signal values (evaluation.replay.HeldOutQuery), each ranked
    again through the pipeline with the fit's whole-query weights (with its pins: `use_pins`).
    The class rules read every task's raw fused score, the values fused once more (as the
    fitter re-fuses its cached CV values: search.pipeline's docstring)."""
    index, params = pipeline.index, pipeline.params
    weights, shortlist_size = params.weights, params.shortlist_size
    tasks_by_id = {t.id: t for t in index.tasks}
    misses: list[Miss] = []
    for row in rows:
        gold = tuple(row.gold)
        if not gold or set(gold) & set(row.ranking[:5]):
            continue
        block = blocks[row.query]
        fused, _ = fuse(block.values, weights.for_mode(mode_of(block.values)))
        scored = block.scored if use_pins else replace(block.scored, pinned=())
        ranked = pipeline.fuse(scored, max(shortlist_size, 20), weights)
        ranking = [item.task.id for item in ranked.result.ranked]
        cls, reason, unknown, unlinked = classify(index, block, np.asarray(fused), ranking, row, shortlist_size,
                                                  pipeline.typo_min_similarity)
        rank = next((i for i, t in enumerate(row.ranking, start=1) if t in gold), None)
        misses.append(Miss(row.query, gold, row.category, cls, reason, row.ranking[:5], rank, unknown,
                           suggest_case(row.query, gold, row.category, tasks_by_id, unlinked),
                           held_out_words(index, row.query)))
    counts = {c: sum(1 for m in misses if m.cls == c) for c in CLASSES}
    worst = sorted(misses, key=lambda m: (-(m.gold_rank or 10_000), m.query))
    return {"n_misses": len(misses), "counts": counts,
            "shares": {c: (counts[c] / len(misses) if misses else None) for c in CLASSES},
            "misses": [m.__dict__ for m in worst]}
