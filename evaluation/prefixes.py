"""Type-ahead quality: what a person is shown after typing the first 3, 5 and 8 characters.

    python app.py evaluate-prefixes --catalog catalog/data/headstart_catalog.jsonl \
        --cases catalog/data/headstart_cases.jsonl            # the demo, hash holdout 0.2 seed 42
    python app.py evaluate-prefixes --catalog ... --cases ... --cold-start   # the demo with no cases
    python app.py evaluate-prefixes --clinc150 ../shared/data/clinc150   # CLINC150 train -> val

What a person has typed after n characters is the held-out query cut at n (`query[:n]`, the
whole query when it is shorter); each cut is ranked exactly as /api/search ranks it (the
product's own fit on the training split only, its index, its signals, the typing weights and
threshold where the cut is read as unfinished, pins, the abstention), in both modes: embeddings on
("full") and off ("sparse", the degraded mode). In-scope held-out cases only (a prefix of an
out-of-scope query has no gold).

`found@5`: the gold task is among the top 5 AND the answer is not "no confident match" (the
widget then shows suggestions, not results): a refused cut is a miss. `hit@5` answers every cut
(the ranking alone). `refused`: the share of cuts answered "no confident match". `engine@5`: the
plain prefix search engine (evaluation.prefix_engine) on the same cuts. Both read a cut's
trailing space as a finished last word (the widget sends one trailing space; the API passes it
on as AnalysedQuery.finished). Results: docs/prefix-search.md.

`--every-keystroke` (issue 43): a person sees every keystroke in a row, not three cuts. Each
held-out query is typed one character at a time from the third (`query[:n]` for n = 3 .. its
length, each ranked as the widget's request for it is: the text, and what the widget shows for
the keystroke before it, on screen: search.sequence), and the sequence is judged as a whole
(`keystroke_score`) on the widget's list (WIDGET_LISTED results after the tail cut): the share of
keystrokes refused, how often the gold, once shown, is gone on the next keystroke (per query), the
share of queries that never lose it once shown, and the flips (answered, refused, answered on
three keystrokes in a row); `alone`: the same keystrokes each judged on its own, as before the
sequence was.
"""
from __future__ import annotations

from dataclasses import replace

from evaluation.evaluate import Split, fit_on_training
from evaluation.metrics import hit_at, reciprocal_rank
from evaluation.prefix_engine import build_prefix_engine
from evaluation.replay import heldout_index, heldout_queries, replay_pipeline
from search.confidence import shown
from search.fitting import FitContext
from search.pipeline import Pipeline
from search.request import EVERYONE, SearchRequest
from search.sequence import HOLD_SLACK
from search.ranker import default_params

CUTS = (3, 5, 8)
#: The results a person sees per keystroke in the sequence measure: the widget's list (widget.js DEFAULTS.k).
WIDGET_LISTED = 8
CUT_DEPTH = 10
#: How deep a keystroke is ranked: as the service ranks it (serving.service: at least the fit's
#: shortlist), deep enough for the held tasks (search.sequence: k + HOLD_SLACK places; the tasks
#: on screen are ranked wherever they fall besides: search.pipeline.Pipeline.fuse)
KEYSTROKE_DEPTH = WIDGET_LISTED + HOLD_SLACK


def prefix_cases(test, cut: int | None):
    """The in-scope held-out cases with their query cut after `cut` characters (None: whole)."""
    return [replace(case, query=case.query[:cut] if cut else case.query) for case in test
            if case.gold and (case.query[:cut] if cut else case.query).strip()]


def score(queries, pipeline: Pipeline, mode: str) -> dict:
    """found@5, hit@5, MRR and the refused share of the product's answers to `queries`
    (evaluation.replay.HeldOutQuery), ranked by `pipeline` (the held-out index and the fit)."""
    hits, found, refused, reciprocal = [], [], [], []
    shown_counts = {"uncut": [0, 0], "cut": [0, 0]}   # [results shown, of which wrong], answered queries
    found_cut = []                              # found@5 with the tail cut: the gold among what is shown
    for query in queries:
        ranked = pipeline.fuse(query.for_mode(mode), CUT_DEPTH)   # the fit's weights, abstention and tail cut
        result, answered = ranked.result, ranked.answered
        ranking, gold = [item.task.id for item in result.ranked], set(query.case.gold)
        hit = hit_at(ranking, gold, 5)
        hits.append(hit)
        found.append(hit and answered)
        refused.append(not answered)
        reciprocal.append(reciprocal_rank(ranking, gold))
        kept = {name: [] for name in ("uncut", "cut")}   # what is shown: every top 5, and after the tail cut
        if answered:
            kept = {name: [item.task.id for item in shown(result.ranked[:5], ratio)] for name, ratio in
                    (("uncut", 0.0), ("cut", ranked.tail))}
        for name, ids in kept.items():
            shown_counts[name][0] += len(ids)
            shown_counts[name][1] += sum(task_id not in gold for task_id in ids)
        found_cut.append(bool(gold & set(kept["cut"])))
    n = len(hits)

    def mean(values):
        return round(sum(values) / n, 4) if n else None
    answered = n - sum(refused)
    return {"n": n, "found@5": mean(found), "found@5_cut": mean(found_cut), "hit@5": mean(hits),
            "refused": mean(refused), "mrr": mean(reciprocal), "unfinished": mean([bool(q.unfinished) for q in queries]),
            # the score-tail cut (RankerParams.tail_for): results shown per answered query of the top 5,
            # and the share of them that are wrong, without and with the cut
            **{f"shown_{name}": round(count / answered, 3) if answered else None
               for name, (count, _) in shown_counts.items()},
            **{f"wrong_share_{name}": round(bad / count, 4) if count else None
               for name, (count, bad) in shown_counts.items()}}


def keystroke_cases(test, in_scope: bool = True) -> list[tuple[int, object]]:
    """(query number, case cut after n characters) for every n from 3 to the whole query, of each
    in-scope held-out case (`in_scope` False: of each out-of-scope one): what the widget asks for
    as the person types it."""
    out = []
    for number, case in enumerate(c for c in test if bool(c.gold) == in_scope):
        for n in range(min(3, len(case.query)), len(case.query) + 1):
            if case.query[:n].strip():
                out.append((number, replace(case, query=case.query[:n])))
    return out


def shown_gold(query, pipeline: Pipeline, mode: str, screen: SearchRequest | None = None,
               listed: int = 5) -> tuple[bool, bool, tuple[str, ...]]:
    """(answered, the gold among the results shown, the ids shown): the top `listed` after the
    score-tail cut, and the tasks on screen the sequence holds (`screen`: the widget's request for
    the keystroke, SearchRequest.typed with what is on screen: its `held`, `quiet` and `same_word`)."""
    ranked = pipeline.fuse(query.for_mode(mode), max(KEYSTROKE_DEPTH, pipeline.params.shortlist_size), screen=screen)
    ids = tuple(item.task.id for item in ranked.shown(listed))
    return ranked.answers(listed), bool(set(ids) & set(query.case.gold)), ids


def keystroke_score(sequences: list[list[tuple[bool, bool]]]) -> dict:
    """The type-ahead as a person watches it, from each query's keystrokes in order, each
    (answered, gold shown):

    * refused      share of keystrokes answered "no confident match";
    * vanished     times per query the gold was shown and is gone on the next keystroke;
    * never_lost   of the queries whose gold is ever shown, the share where it never vanishes;
    * flips        answered -> refused -> answered on three keystrokes in a row (total, per query);
    * found_first  the mean share of a query's keystrokes typed before its gold is first shown
                   (1.0 when it never is)."""
    keystrokes = [step for sequence in sequences for step in sequence]
    vanished = [sum(1 for a, b in zip(seq, seq[1:]) if a[1] and not b[1]) for seq in sequences]
    ever = [v for v, seq in zip(vanished, sequences) if any(gold for _, gold in seq)]
    flips = [sum(1 for a, b, c in zip(seq, seq[1:], seq[2:]) if a[0] and not b[0] and c[0]) for seq in sequences]
    first = [next((i for i, (_, gold) in enumerate(seq) if gold), len(seq)) / len(seq) for seq in sequences if seq]
    n = len(sequences)
    return {"queries": n, "keystrokes": len(keystrokes),
            "refused": round(sum(not a for a, _ in keystrokes) / len(keystrokes), 4) if keystrokes else None,
            "vanished_per_query": round(sum(vanished) / n, 3) if n else None,
            "never_lost": round(sum(v == 0 for v in ever) / len(ever), 4) if ever else None,
            "flips": sum(flips), "flips_per_query": round(sum(flips) / n, 3) if n else None,
            "found_first": round(sum(first) / len(first), 4) if first else None}


def typed_sequences(pipeline: Pipeline, tagged, queries, mode: str, sequenced: bool,
                    language: str | None = None) -> dict[int, list[tuple]]:
    """{query number: [(answered, gold shown, ids shown) per keystroke, in order]}: each keystroke
    (`keystroke_cases`, scored as `queries`) ranked as the widget's request for it is, with the
    tasks shown for the keystroke before it on screen (`sequenced`: search.sequence) or alone, on
    a page in `language` (the API's `lang`)."""
    sequences: dict[int, list[tuple]] = {}
    texts: dict[int, str] = {}
    for (number, case), query in zip(tagged, queries):
        before = sequences.get(number)
        screen = (SearchRequest.typed(case.query, EVERYONE, typing=True, after=texts[number], shown=before[-1][2],
                                      language=language)
                  if sequenced and before else None)
        sequences.setdefault(number, []).append(shown_gold(query, pipeline, mode, screen, WIDGET_LISTED))
        texts[number] = case.query
    return sequences


def every_keystroke(pipeline: Pipeline, test, language: str | None = None) -> dict:
    """{mode: keystroke_score} of the held-out `test` typed one character at a time, each keystroke
    ranked as the widget's request for it is (SearchRequest.typed: the text, and the tasks shown
    for the keystroke before it, which it extends: search.sequence), and, as `alone`, each keystroke
    judged on its own (the type-ahead before issue 43 item 1). Beside the sequence figures:
    `shown` and `wrong`, the results shown per keystroke and those of them not the gold, and
    `off_topic_answered_typed`: of the out-of-scope held-out queries, the share whose last keystroke
    (the whole text, still typed: no Enter) is answered (a submitted query is judged on its own).
    `language`: the page's language every keystroke is sent with (the widget's `lang`)."""
    tagged = keystroke_cases(test)
    queries, _ = heldout_queries(pipeline, [case for _, case in tagged], typed=True, typing=True, language=language)
    off_tagged = keystroke_cases(test, in_scope=False)
    off_queries, _ = (heldout_queries(pipeline, [case for _, case in off_tagged], typed=True, typing=True,
                                      language=language)
                      if off_tagged else ([], None))
    modes = ("full", "sparse") if pipeline.embedder is not None and pipeline.index.has_vectors else ("sparse",)
    out = {}
    for mode in modes:
        for name, sequenced in (("sequence", True), ("alone", False)):
            sequences = typed_sequences(pipeline, tagged, queries, mode, sequenced, language)
            steps = [(number, step) for number, seq in sequences.items() for step in seq]
            score = keystroke_score([[(answered, found) for answered, found, _ in seq] for seq in sequences.values()])
            n = len(steps) or 1
            gold = {number: set(case.gold) for number, case in tagged}
            score.update(shown=round(sum(len(ids) for _, (_, _, ids) in steps) / n, 3),
                         wrong=round(sum(sum(i not in gold[number] for i in ids) for number, (_, _, ids) in steps) / n, 3))
            off = typed_sequences(pipeline, off_tagged, off_queries, mode, sequenced, language)
            score["off_topic_answered_typed"] = (round(sum(seq[-1][0] for seq in off.values()) / len(off), 4)
                                                 if off else None)
            score["off_topic_queries"] = len(off)
            out.setdefault(mode, {})[name] = score
    return {mode: {**scores["sequence"], "alone": scores["alone"]} for mode, scores in out.items()}


def engine_score(engine, cases) -> dict:
    hits = [hit_at(engine.rank(case.query, 5), set(case.gold), 5) for case in cases]
    return {"n": len(hits), "hit@5": round(sum(hits) / len(hits), 4) if hits else None}


def run(settings, split: Split, embedder, cuts=CUTS, seed: int = 42, cv_max_queries: int = 3000,
        cold_start: bool = False, keystrokes: bool = False, language: str | None = None) -> dict:
    """{cut: {"full"|"sparse": score, "engine": engine_score}} for each cut and the whole query of
    the held-out `split.test`, the product fitted on `split.train` (evaluation.evaluate.Split).
    `cold_start`: no case at all is given to the product or the engine (the shipped defaults rank).
    `keystrokes`: also "every_keystroke" (`every_keystroke`). `language`: the page's language every
    typed text is sent with (the API's `lang`, lexicon.language.page_language; None: none said)."""
    tasks = [t for t in split.tasks if t.active]
    train, test = split.train, split.test
    if cold_start:
        train = []
        params = default_params(settings)
    else:
        params, _, _ = fit_on_training(FitContext(settings, tasks, train, embedder, seed, cv_max_queries), show=False)
    index = heldout_index(settings, tasks, train, embedder, params)
    pipeline = replay_pipeline(settings, index, params, embedder)
    engine = build_prefix_engine(tasks, train)
    out = {}
    for cut in (*cuts, None):
        cases = prefix_cases(test, cut)
        # a cut as the widget sends a keystroke (typing=1), a space typed after the last word
        # finishing it (AnalysedQuery.finished); the whole row as before the widget said it was
        # typing (no `typing`: the prefilter's reading), so that it stays comparable
        queries, _ = heldout_queries(pipeline, cases, typed=True, typing=True if cut else None, language=language)
        modes = ("full", "sparse") if embedder is not None and index.has_vectors else ("sparse",)
        out[str(cut or "whole")] = {**{mode: score(queries, pipeline, mode) for mode in modes},
                                    "engine": engine_score(engine, cases)}
    if keystrokes:
        out["every_keystroke"] = every_keystroke(pipeline, test, language)
    return out
