"""Learning from use: the pure math that turns clicks into ranking evidence (issue 16).

Nothing here reads a database or a clock. analytics.learning feeds it the votes it collects
from the search log (each click bound to its search, one vote per session, query and task)
and stores the aggregates; search.fitting, the index (LearnedMemory) and the `learned` signal
(search/signal/learned.py: its query-time value) use the learned exemplars.

**Click model: the position-based model** (PBM; Craswell et al. 2008, Richardson et al. 2007;
notation of Chuklin, Markov & de Rijke, *Click Models for Web Search*, 2015, section 3.4):

    P(click | q, t, shown at position k) = theta_k * r_{q,t}

theta_k: the probability that a result at position k is examined at all (position bias);
r_{q,t}: the probability that task t is what the person searching q wants (relevance).

* **Propensities** theta_k are estimated from the impressions and clicks by EM over the PBM
  (`em_propensities`; Chuklin et al. 2015 section 4.2; Wang et al., *Position bias estimation
  for unbiased learning to rank*, WSDM 2018):

      theta_k <- mean over votes at k of [ c + (1 - c) * theta_k (1 - r) / (1 - theta_k r) ]
      r_qt    <- mean over votes of (q,t) of [ c + (1 - c) * (1 - theta_k) r / (1 - theta_k r) ]

  starting from the power law theta_k = k^-1 (Joachims et al., *Unbiased learning-to-rank with
  biased feedback*, WSDM 2017), then made non-increasing in k, floored at MIN_PROPENSITY and
  scaled to theta_1 = 1. With few votes (< MIN_EM_VOTES) the power law is used as it is.
* **Relevance** of a pair is clicks over expected clicks (COEC; Zhang & Jones 2007, Chapelle
  et al. 2009) with a Beta prior of strength a and mean r0, on time-decayed sums:

      r_{q,t} = (C + a r0) / (E + a),  C = sum_v d(v) c_v,  E = sum_v d(v) theta_{k_v}
      d(v) = 0.5 ** (age_v / half_life)

  `E` is "examinations": the position-bias-weighted impressions. A task shown at position 8
  (theta ~0.2) that is clicked whenever it is examined gets r ~1, as one at position 1 does:
  the correction is what lets a task that starts below the fold rise.
* **Robustness**: a vote is one (session, query, task); a session that votes on more than
  `max_votes` pairs in one aggregation window has each vote weighted max_votes / n (its total
  weight is bounded); a pair counts only with at least `min_sessions` distinct clicking
  sessions (or `majority_sessions` of them when they are most of the sessions that clicked
  anything for the query: `supported`), from at least `min_networks` distinct networks or
  `min_people` distinct verified people (analytics.sources), and relevance >= `min_relevance`
  (`eligible`).
* **Distinct across windows**: the aggregates keep no session id, yet a session (or network)
  that clicks a pair again in a later aggregation window must not count twice. Each pair keeps
  a linear-counting sketch of its clicking sessions, one of their networks and one of their
  verified people (`sketch_of`,
  `sketch_union`, `sketch_count`; Whang, Vander-Zanden & Taylor, *A linear-time probabilistic
  counting algorithm for database applications*, ACM TODS 15(2), 1990): a bitmap of
  SKETCH_BITS bits with bit h(key) mod m set per key, merged by OR, counted as

      n = -m ln(1 - b / m)      (b bits set; rounded)

  A key seen again sets the same bit, so nothing is counted twice; each bit stands for 1/m of
  all sessions, so the bitmap names nobody. Up to b = 10 (at m = 512; the thresholds read 2
  and 3) the rounded estimate is b itself, so a small count can only be under, never over:
  two distinct keys share a bit with probability about n(n - 1) / 2m (0.6% at n = 3). Why not
  a library: HyperLogLog (datasketch) is made for large counts and falls back to this very
  linear counting below ~2.5 m; the bitmap is the whole algorithm, in 20 lines.
"""
from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable, NamedTuple, Sequence

import numpy as np

from catalog.records import IMPLICIT_CATEGORY, CaseRecord
from lexicon.text import normalise_query as normalised_query   # the one query key (lexicon.text)

MIN_PROPENSITY = 0.05
MIN_EM_VOTES = 200
EM_ITERATIONS = 50
PRIOR_STRENGTH = 1.0   # a: the Beta prior's weight, in examinations
PRIOR_MEAN = 0.1       # r0: what an unclicked, rarely examined pair is assumed to be worth


# --- click model ------------------------------------------------------------------------------

def power_propensities(max_position: int, eta: float = 1.0) -> np.ndarray:
    """theta_k = k^-eta for k = 1..max_position (index 0 is position 1)."""
    return np.arange(1, max_position + 1, dtype=np.float64) ** -eta


def em_propensities(pairs: np.ndarray, positions: np.ndarray, clicks: np.ndarray, max_position: int,
                    iterations: int = EM_ITERATIONS, weights: np.ndarray | None = None) -> np.ndarray:
    """PBM examination propensities theta_1..theta_max by EM (module docstring).

    `pairs`: an integer id of each vote's (query, task); `positions`: its 1-based position;
    `clicks`: 0/1; `weights`: each vote's weight in the means (`source_weights`; None: 1 each;
    the weighted form of the same updates). Returns an array of `max_position` values,
    non-increasing, theta_1 = 1."""
    theta = power_propensities(max_position)
    if len(clicks) < MIN_EM_VOTES:
        return theta
    k = positions.astype(np.int64) - 1
    c = clicks.astype(np.float64)
    w = np.ones(len(c)) if weights is None else np.asarray(weights, dtype=np.float64)
    n_pairs = int(pairs.max()) + 1
    count_pair = np.bincount(pairs, w, minlength=n_pairs)
    count_pos = np.bincount(k, w, minlength=max_position)
    r = np.full(n_pairs, 0.5)
    for _ in range(iterations):
        th, rr = theta[k], r[pairs]
        denominator = np.maximum(1.0 - th * rr, 1e-12)
        examined = c + (1 - c) * th * (1 - rr) / denominator
        relevant = c + (1 - c) * (1 - th) * rr / denominator
        theta = np.where(count_pos > 0, np.bincount(k, examined * w, max_position) / np.where(count_pos > 0, count_pos, 1),
                         theta)
        r = np.bincount(pairs, relevant * w, n_pairs) / np.where(count_pair > 0, count_pair, 1)
    return normalise_propensities(theta)


def source_weights(sources: Sequence[str], pairs: np.ndarray, max_pairs: float | None) -> np.ndarray:
    """Per vote, min(1, max_pairs / p_s), where p_s is the number of distinct (query, task) pairs
    the vote's source (its verified person, else its network, else its session) voted on in the
    window: no source weighs more than `max_pairs` pairs' worth in the position-bias estimate
    (`em_propensities`), the EM's form of `heavy_networks`' cap. The propensities are one
    estimate shared by every pair: two networks clicking only the last result of hundreds of
    lists raised theta_8 from 0.14 to 0.3 and with it every pair's examinations (issue 33;
    tests/test_learning.py). A weight common to every vote cancels in the means, so a window
    whose votes all come from one office network is estimated as without weights.
    `max_pairs` None or 0: 1 each."""
    if not max_pairs or not len(pairs):
        return np.ones(len(pairs))
    keys, source = np.unique(np.asarray(sources, dtype=object).astype(str), return_inverse=True)
    distinct = np.unique(np.stack([source, np.asarray(pairs)]), axis=1)[0]
    per_source = np.bincount(distinct, minlength=len(keys)).astype(np.float64)
    return np.minimum(1.0, max_pairs / per_source[source])


def normalise_propensities(theta: np.ndarray) -> np.ndarray:
    """Non-increasing in position (a running minimum), scaled to theta_1 = 1, floored."""
    theta = np.minimum.accumulate(np.maximum(theta, 1e-9))
    theta = theta / theta[0]
    return np.maximum(theta, MIN_PROPENSITY)


def decay(age_days: float | np.ndarray, half_life_days: float) -> float | np.ndarray:
    """d = 0.5 ** (age / half_life): the weight of evidence `age_days` old."""
    return 0.5 ** (np.maximum(age_days, 0.0) / half_life_days)


def coec_relevance(clicks: float, examinations: float, strength: float = PRIOR_STRENGTH,
                   prior: float = PRIOR_MEAN) -> float:
    """r = (C + a r0) / (E + a), clipped to [0, 1] (clicks over expected clicks, smoothed)."""
    return float(min(1.0, max(0.0, (clicks + strength * prior) / (examinations + strength))))


SKETCH_BITS = 512       # m: bits of each pair's distinct-count sketch (64 bytes)
# The clicking networks' sketch is kept at 8 times that (512 bytes; migration 0016). The share and
# cap rules still judge each of the 512 bits (`heavy_networks`); the finer bits only say which of
# the networks folded into a heavy bit made it heavy, so that an honest network sharing the bit
# keeps its voucher (`HeavyNetworks`). A multiple of SKETCH_BITS: h mod 4096 folds to h mod 512.
NETWORK_SKETCH_BITS = 4096


def sketch_of(keys: Iterable[str], bits: int = SKETCH_BITS) -> bytes:
    """The linear-counting bitmap of `keys` (module docstring): bit h(key) mod m set for each,
    h = BLAKE2b-64 of the key (a fixed hash, not a secret: the keys are random session ids
    and the server's keyed network pseudonyms, so nothing can be read back from a bit)."""
    value = 0
    for key in keys:
        digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8, person=b"tf-sketch").digest()
        value |= 1 << (int.from_bytes(digest, "big") % bits)
    return value.to_bytes(bits // 8, "big")


def fold_sketch(sketch: bytes, bits: int) -> bytes:
    """The sketch of the same keys at `bits` bits, a divisor of its own width: bit b becomes
    b mod bits, as `sketch_of` would have set it (h mod bits = (h mod m) mod bits when bits
    divides m)."""
    width = len(sketch) * 8
    if width == bits:
        return sketch
    if width % bits:
        raise ValueError(f"a {width}-bit sketch does not fold to {bits} bits")
    value, folded, mask = int.from_bytes(sketch, "big"), 0, (1 << bits) - 1
    for chunk in range(width // bits):
        folded |= (value >> (chunk * bits)) & mask
    return folded.to_bytes(bits // 8, "big")


def sketch_union(a: bytes | None, b: bytes | None) -> bytes | None:
    """The sketch of both key sets (bitwise OR); None only when both are None. Of two widths, the
    wider is folded to the narrower (`fold_sketch`: a row aggregated before migration 0016)."""
    if a is None or b is None:
        return b if a is None else a
    bits = min(len(a), len(b)) * 8
    a, b = fold_sketch(a, bits), fold_sketch(b, bits)
    return (int.from_bytes(a, "big") | int.from_bytes(b, "big")).to_bytes(bits // 8, "big")


def set_bits(sketch: bytes | None) -> frozenset[int]:
    """The indices of a sketch's set bits (bit h(key) mod m of `sketch_of`)."""
    value, found = int.from_bytes(sketch or b"", "big"), []
    while value:
        low = value & -value
        found.append(low.bit_length() - 1)
        value ^= low
    return frozenset(found)


def sketch_count(sketch: bytes | None) -> int:
    """n = round(-m ln(1 - b/m)): the distinct keys of a sketch (module docstring); a full
    bitmap (b = m) gives m ln m, the estimate's own ceiling."""
    if not sketch:
        return 0
    m, b = len(sketch) * 8, int.from_bytes(sketch, "big").bit_count()
    if b >= m:
        return int(round(m * np.log(m)))
    return int(round(-m * np.log1p(-b / m)))


def session_weights(sessions: Sequence[str], max_votes: int) -> np.ndarray:
    """Per vote, min(1, max_votes / n_s) where n_s is the number of votes of the vote's session:
    no session weighs more than `max_votes` votes in one window, however much it clicks."""
    keys, inverse, counts = np.unique(np.asarray(sessions, dtype=object).astype(str), return_inverse=True,
                                      return_counts=True)
    return np.minimum(1.0, max_votes / counts[inverse].astype(np.float64))


# --- what the fit and the prefilter use -------------------------------------------------------


@dataclass(frozen=True)
class LearnedExemplar:
    """A (normalised query, task) pair that use has shown relevant: an implicit exemplar.

    `verified`: at least the counting rule's `min_people` distinct verified people clicked it
    (`eligible`). Only such a pair is a voice the product trusts in full; what a pair that counts
    on anonymous networks alone adds, as a case or to the `learned` signal, counts only inside
    the trusted evidence's top ANONYMOUS_WINDOW (`anonymous_bounded`)."""

    query: str
    task_id: str
    relevance: float
    sessions: int
    verified: bool = True


class LearnedInputs(NamedTuple):
    """What a per-catalog fit takes from use (analytics.learning.fit_inputs)."""

    learned: Sequence[LearnedExemplar]          # the pairs that count (eligible)
    blocked: frozenset[tuple[str, str]]         # the admin's blocked pairs
    unclicked: Sequence[str] = ()               # queries nobody clicks (unclicked_queries): abstention negatives


@dataclass(frozen=True)
class CountingRule:
    """The thresholds a learned pair must meet to count (`eligible`, `shortfall`): at least
    `min_sessions` distinct clicking sessions (or, with `majority_sessions`, that many when they
    are a strict majority of the query's: `supported`), from at least `min_networks` distinct
    client networks or `min_people` distinct verified people (`distinct_enough`), and relevance at
    least `min_relevance`; with `max_network_share`, a network holding more than that share of
    the pairs that count vouches for none of them, nor one holding more than `max_network_pairs`
    pairs' worth of them (`heavy_networks`). Read from the settings in one place:
    analytics.learning.counting_rule."""

    min_sessions: int
    min_relevance: float
    min_networks: int = 1
    min_people: int | None = None
    majority_sessions: int | None = None
    max_network_share: float | None = None
    max_network_pairs: float | None = None


@dataclass(frozen=True)
class UnclickedRule:
    """When a query counts as one nobody clicks (`unclicked_queries`): its viewers, their networks
    or verified people, the share of them that clicked, and the age of its latest evidence (None:
    any age). `min_sessions` 0 turns it off. Read from the settings in one place:
    analytics.learning.unclicked_rule."""

    min_sessions: int
    min_networks: int
    max_click_share: float
    max_age_days: float | None = None
    min_people: int | None = None


def unclicked_queries(pairs: Iterable, rule: UnclickedRule, exclude: frozenset[str] = frozenset(),
                      now: datetime | None = None) -> tuple[str, ...]:
    """The queries that repeatedly ended without a click: negative evidence for the abstention
    (search.fitting.abstention_negatives, source "unclicked"). A query qualifies (UnclickedRule)
    when

        viewers(q) >= min_sessions,
        viewer networks(q) >= min_networks  or  viewer people(q) >= min_people,
        clickers(q) <= max_click_share * viewers(q)

    with viewers the distinct sessions shown any of its results (an impression bound to its
    search), their networks and verified people (LearnedPair.query_viewer_networks,
    query_viewer_people), clickers the sessions that clicked any (query_sessions), and (with
    `max_age_days`) its latest evidence at most that old. `exclude`: queries with a pair that
    counts. `min_sessions` 0 turns it off.

    Why each condition. Distinct sessions, and networks or people: one session or one address
    flooding a query with searches shows it to one viewer, while staff behind one office address
    are told apart by who the host verified them to be, as for the pairs that count
    (`enough_sources`: the two counts are never added). The click share, not zero clicks: a sixth of
    people click something at random (the simulator's noise). The age: a query the product
    refuses is shown to nobody, so nothing can ever clear it; its evidence expires instead, the
    query is answered again and traffic judges it anew (no refusal feeds itself forever). And
    whatever the negatives, the threshold is set on the written in-scope cases alone (the
    budget), so they can shape the abstention's score, never the share of answerable queries
    it refuses."""
    if rule.min_sessions <= 0:
        return ()
    now = now or datetime.now(timezone.utc)
    latest: dict[str, object] = {}
    for pair in pairs:
        if pair.query_viewers is None or pair.query_sessions is None:
            continue
        if pair.query not in latest or pair.updated_at > latest[pair.query].updated_at:
            latest[pair.query] = pair
    found = []
    for query, pair in latest.items():
        if query in exclude:
            continue
        if rule.max_age_days is not None and (now - pair.updated_at).total_seconds() > rule.max_age_days * 86400:
            continue
        viewers = int(pair.query_viewers)
        distinct = enough_sources(int(pair.query_viewer_networks or 0), int(pair.query_viewer_people or 0),
                                  rule.min_networks, rule.min_people)
        if viewers >= rule.min_sessions and distinct and int(pair.query_sessions) <= rule.max_click_share * viewers:
            found.append(query)
    return tuple(sorted(found))


def eligible(pairs: Iterable, rule: CountingRule, blocked: frozenset[tuple[str, str]] = frozenset(),
             task_ids: Iterable[str] | None = None) -> tuple[LearnedExemplar, ...]:
    """The pairs that count under `rule` (`shortfall` finds nothing missing): enough distinct
    clicking sessions (`supported`), coming from at least `min_networks` distinct client networks
    (pairs without a `networks` count: sessions) or, with `min_people`, from at least that many
    distinct verified people (pairs without a `people` count: none); relevance at least
    `min_relevance`, not blocked by the admin, and (with `task_ids`) on a known task. `pairs`:
    anything with query, task_id, sessions and relevance (analytics.learning.LearnedPair).
    With `max_network_share`, a network that holds more than that share of the pairs that
    count vouches for none of them (`heavy_networks`), and the pairs are judged again without
    it. Sorted by (query, task) so that the fit's input, and its digest, are stable."""
    known = frozenset(task_ids) if task_ids is not None else None
    pairs = list(pairs)

    def counting(heavy: frozenset[int]) -> list:
        return [p for p in pairs if shortfall(p, rule, blocked, known, heavy) is None]

    found = counting(frozenset())
    heavy = heavy_under(rule, found)
    if heavy:   # only fewer networks per pair: a subset of the pairs found
        found = counting(heavy)
    found = [LearnedExemplar(p.query, p.task_id, round(float(p.relevance), 4), int(p.sessions),
                             verified_by_people(p, rule.min_people)) for p in found]
    return tuple(sorted(found, key=lambda e: (e.query, e.task_id)))


def verified_by_people(pair, min_people: int | None) -> bool:
    """Whether at least `min_people` distinct verified people clicked a pair (`people`: the
    sketch's count of their keyed pseudonyms, analytics.sources.person_pseudonym; two people
    sharing a pseudonym are counted once, so the count is never over). Never without a
    `min_people`: then nobody is counted as a person."""
    return min_people is not None and int(getattr(pair, "people", 0) or 0) >= min_people


def heavy_under(rule: CountingRule, counting: Sequence) -> HeavyNetworks:
    """The networks that vouch for nothing under `rule` (`heavy_networks` with its share and
    cap), given the pairs that count before it (`counting`): what `eligible` and the admin's
    panel (`shortfall(..., heavy)`) both judge with."""
    if rule.max_network_share is None and rule.max_network_pairs is None:
        return HeavyNetworks()
    return heavy_networks(counting, rule.max_network_share if rule.max_network_share is not None else 1.0,
                          max_pairs=rule.max_network_pairs)


def shortfall(pair, rule: CountingRule, blocked: frozenset[tuple[str, str]] = frozenset(),
              known: frozenset[str] | None = None, heavy: frozenset[int] = frozenset()) -> str | None:
    """Why a learned pair does not count under `rule`, in a few words (the first rule of
    `eligible` it fails), or None when it counts: what the admin's editor shows beside each pair.
    `heavy`: the networks (sketch bits) that vouch for no pair (`heavy_networks`, a rule over
    all the pairs: `eligible` finds them; the rule's `max_network_share` needs the other pairs,
    so one pair alone is not judged by it)."""
    if (pair.query, pair.task_id) in blocked:
        return "blocked"
    if known is not None and pair.task_id not in known:
        return "not an active task"
    if not supported(pair, rule.min_sessions, rule.majority_sessions):
        return "too few sessions"
    if not distinct_enough(pair, rule.min_networks, rule.min_people):
        return "too few networks or people"
    if not distinct_enough(pair, rule.min_networks, rule.min_people, heavy):
        return "its networks clicked too many of the pairs"
    if pair.relevance < rule.min_relevance:
        return "relevance too low"
    return None


# --- no network buys a share of the learned evidence (issue 33 item 1) ---------------------------

# Shares are taken of at least this many pairs: with fewer, one pair would put its networks at
# 100%. So while few pairs count, a network may vouch for at most max_share * 5 pairs' worth of
# credit (1 at 0.2): two networks make at most 2 pairs count, too few to buy the `learned`
# signal a weight (search.fitting.choose_learned_signal asks for 3 more first hits than losses).
NETWORK_SHARE_FLOOR = 5


def network_bits(pair) -> frozenset[int]:
    """The networks that clicked a pair, as the SKETCH_BITS bits of its network sketch
    (`sketch_of`: one bit per network pseudonym, the same bit in every pair that network
    clicked; a wider sketch folded: `fold_sketch`); empty for a pair without a sketch (unknown:
    never heavy, never discounted). What the share and cap rules judge."""
    sketch = getattr(pair, "network_sketch", None)
    return set_bits(fold_sketch(sketch, SKETCH_BITS)) if sketch else frozenset()


def fine_network_bits(pair) -> frozenset[int] | None:
    """The pair's networks as the NETWORK_SKETCH_BITS bits of its sketch; None for a pair
    aggregated with 512 bits only (before migration 0016) or with no sketch."""
    sketch = getattr(pair, "network_sketch", None)
    return set_bits(sketch) if sketch and len(sketch) * 8 == NETWORK_SKETCH_BITS else None


class HeavyNetworks(frozenset):
    """The SKETCH_BITS bits whose networks vouch for nothing (`heavy_networks`), and, in `fine`,
    the NETWORK_SKETCH_BITS bits of the networks that made each heavy: a pair with the finer
    sketch loses only those, one aggregated before it loses the whole bit (`discounted`)."""

    fine: frozenset[int] = frozenset()

    def __new__(cls, members: Iterable[int] = (), fine: Iterable[int] = ()) -> "HeavyNetworks":
        heavy = super().__new__(cls, members)
        heavy.fine = frozenset(fine)
        return heavy


def discounted(pair, heavy: frozenset[int]) -> int | None:
    """How many of the pair's networks remain once the heavy ones are left out, or None when
    none of its networks is heavy. With the finer sketch and a HeavyNetworks, only the networks
    that made a bit heavy are left out; otherwise every network of a heavy bit."""
    coarse = network_bits(pair)
    if not coarse & heavy:
        return None
    fine = fine_network_bits(pair)
    if fine is None or not isinstance(heavy, HeavyNetworks):
        return len(coarse - heavy)
    return len(fine - heavy.fine)


def heavy_within(pairs: Sequence, heavy: frozenset[int], limit: float) -> frozenset[int]:
    """The NETWORK_SKETCH_BITS bits that make the heavy SKETCH_BITS bits heavy: within each heavy
    bit, its finer bits are taken heaviest first until the credit left is at most `limit` (the
    credit over which a bit is heavy). A bit's credit (`network_credits`) is split among its
    finer bits as each pair's is: a pair's 1/|networks| equally among its finer bits there. An
    attacker's network over the cap is taken, the honest networks that share its bit are not;
    where pairs aggregated before the finer sketch hold more than `limit` of a bit's credit,
    every finer bit of it is taken (as before the finer sketch)."""
    fine_credit: dict[int, float] = defaultdict(float)
    unrefined: dict[int, float] = defaultdict(float)
    for pair in pairs:
        coarse = network_bits(pair)
        hit = coarse & heavy
        if not hit:
            continue
        fine, share = fine_network_bits(pair), 1.0 / len(coarse)
        for bit in hit:
            members = [f for f in fine if f % SKETCH_BITS == bit] if fine is not None else []
            if not members:
                unrefined[bit] += share
                continue
            for f in members:
                fine_credit[f] += share / len(members)
    taken = set()
    for bit in heavy:
        members = sorted((f for f in fine_credit if f % SKETCH_BITS == bit), key=lambda f: (-fine_credit[f], f))
        left = unrefined[bit] + sum(fine_credit[f] for f in members)
        for f in members:   # (left never falls below unrefined[bit]: over the limit, every one is taken)
            if left <= limit:
                break
            taken.add(f)
            left -= fine_credit[f]
    return frozenset(taken)


def network_shares(pairs: Sequence, floor: int = NETWORK_SHARE_FLOOR) -> dict[int, float]:
    """Per network (sketch bit), its share of the pairs: each pair's credit split equally among
    the networks that clicked it, summed per network, over the number of pairs (at least
    `floor`),

        share(n) = 1 / max(|P|, floor) * sum over pairs p clicked from n of 1 / |networks(p)|

    The shares add up to at most 1, so at most 1/s networks can hold more than s, however many
    networks there are and whichever of them collide in a sketch bit (a pair clicked from 100
    networks gives each a hundredth): a popular honest pair never makes a network heavy, while
    two networks behind every pair hold half of the learned evidence each."""
    return {bit: credit / max(len(pairs), floor) for bit, credit in network_credits(pairs).items()}


# A network's credit is a sketch bit's: each bit stands for 1/SKETCH_BITS of all networks, so with
# many honest networks a bit carries several. The absolute cap is never below this many times a
# bit's mean credit (network_credits), so that honest volume alone never makes a bit heavy.
COLLISION_ALLOWANCE = 4.0


def network_credits(pairs: Sequence) -> dict[int, float]:
    """Per network (sketch bit), the pairs' worth of evidence it vouches for: each pair's credit
    split equally among the networks that clicked it,

        credit(n) = sum over pairs p clicked from n of 1 / |networks(p)|"""
    credits: dict[int, float] = defaultdict(float)
    for pair in pairs:
        bits = network_bits(pair)
        for bit in bits:
            credits[bit] += 1.0 / len(bits)
    return credits


def heavy_networks(pairs: Sequence, max_share: float, floor: int = NETWORK_SHARE_FLOOR,
                   max_pairs: float | None = None) -> HeavyNetworks:
    """The networks holding more than `max_share` of `pairs` (`network_shares`; none with a
    share of 1 or more), and, with `max_pairs`, those vouching for more than that many pairs'
    worth of them in absolute terms (`network_credits`), a cap never below COLLISION_ALLOWANCE
    times a sketch bit's mean credit:

        heavy(n)  <=>  share(n) > max_share  or  credit(n) > max(max_pairs, 4 * sum_m credit(m) / 512)

    Why the absolute cap (issue 33 item 1): a share shrinks as honest evidence grows. Beside
    2,000 honest CLINC150 searches (477 pairs), the audit's two networks held 0.194 of the pairs
    each, under 0.2: all 300 of their pairs counted, were taken as exemplars, and the attack put
    its wrong task first (ops/simulate_attack.py, docs/learning-from-use.md section 4). Credit
    does not shrink: each of them vouched for ~150 pairs' worth. An honest person's network
    vouches for the few queries they clicked; a network behind very many pairs is an office (whose
    staff count as verified people instead) or a campaign. The floor keeps the cap from biting
    on sketch collisions alone: with N honest networks each bit carries about N / 512 of them.

    Why: the network rule (`distinct_enough`) makes one network move nothing, but two networks
    sufficed for any number of pairs. The audit's attacker (issue 33 item 1) clicked ~125 pairs
    from two /24s (cover queries on their top result, and one wrong task): every pair counted,
    and together they bought the `learned` signal a weight of 20 in the fit's CV. A network over
    the share vouches for no pair, so a pair then needs `min_networks` other networks (or
    verified people: the host vouches for those, and an office behind one address learns
    through them). To hold at most s of the pairs an attacker needs more than 2/s /24
    networks (10 at s = 0.2); with 2 networks, at most 2 pairs count (NETWORK_SHARE_FLOOR)."""
    heavy, limit = set(), float("inf")
    if max_share < 1:
        heavy.update(bit for bit, share in network_shares(pairs, floor).items() if share > max_share)
        limit = max_share * max(len(pairs), floor)    # share(n) > max_share  <=>  credit(n) > limit
    if max_pairs is not None:
        credits = network_credits(pairs)
        cap = max(max_pairs, COLLISION_ALLOWANCE * sum(credits.values()) / SKETCH_BITS)
        heavy.update(bit for bit, credit in credits.items() if credit > cap)
        limit = min(limit, cap)
    return HeavyNetworks(heavy, heavy_within(pairs, frozenset(heavy), limit) if heavy else ())


def supported(pair, min_sessions: int, majority_sessions: int | None = None) -> bool:
    """Whether enough distinct sessions clicked a pair: `min_sessions`, or, with
    `majority_sessions`, that many when they are a strict majority of every session that
    clicked anything for the pair's query (`query_sessions`; pairs without it: never),

        s(q, t) >= min_sessions   or   ( s(q, t) >= majority_sessions  and  2 s(q, t) > s(q) )

    The support threshold guards against noise, not abuse (the networks and people do that:
    `distinct_enough`). Noise clicks land on a random shown result, so over thousands of
    (query, task) cells a few get two by coincidence (the birthday problem: cells of rate
    lambda reach 2 with probability ~lambda^2 / 2, 3 with ~lambda^3 / 6), but such a cell sits
    beside its query's real answer and seldom holds most of the query's clicks; a rarely
    searched query's real answer, clicked by the only two sessions that clicked anything, does.
    Measured (docs/learning-from-use.md): of a 4,000-search simulation's 2-session pairs, 66
    were right and 25 wrong; with the majority, 63 right and 2 wrong."""
    if pair.sessions >= min_sessions:
        return True
    query_sessions = getattr(pair, "query_sessions", None)
    return (bool(majority_sessions) and query_sessions is not None and pair.sessions >= majority_sessions
            and 2 * pair.sessions > query_sessions)


def distinct_enough(pair, min_networks: int, min_people: int | None, heavy: frozenset[int] = frozenset()) -> bool:
    """Whether a pair's clicks came from enough distinct sources (`enough_sources`); pairs
    without a `networks` count count their sessions, pairs without a `people` count none.
    `heavy`: networks that vouch for nothing (`heavy_networks`): the pair's networks are
    counted without them."""
    networks = getattr(pair, "networks", pair.sessions)
    left = discounted(pair, heavy) if heavy else None
    if left is not None:
        networks = left
    return enough_sources(networks, getattr(pair, "people", 0), min_networks, min_people)


def enough_sources(networks: int, people: int, min_networks: int, min_people: int | None) -> bool:
    """At least `min_networks` distinct networks or, with `min_people`, that many distinct
    verified people: two counts, never added, so that one person (with and without their token)
    from one network is 1 and 1, never 2. The one rule for the clicks that count
    (`distinct_enough`) and for the viewers of a query nobody clicks (`unclicked_queries`)."""
    return networks >= min_networks or (min_people is not None and people >= min_people)


def learned_cases(exemplars: Sequence[LearnedExemplar], exclude_queries: frozenset[str] = frozenset()) -> tuple[CaseRecord, ...]:
    """The learned exemplars as implicit test cases (query -> its task), for the exemplar memory
    and the lexicon that the neighbour, centroid, prototype and exemplar-BM25 signals read: use
    then generalises like a written case does (to paraphrases near it), not only through the
    separate `learned` signal. The fit decides by CV whether an index gets them
    (search.fitting.fit_ranker, `learned_as_cases`). `exclude_queries`: left out (a CV fold's
    held-out queries). Several eligible tasks for one query give one case with every task.

    A case reshapes the lexicon, the exemplar memory and the prototypes without a bound on how
    far it can lift a task, and the CV that admits cases is won by any traffic that copies the
    written cases in other words (issue 42 item 1: padded cover from 20 networks took the
    as-cases test and carried a wrong pair with it, rank 10 -> 2). So where cases that anonymous
    networks alone stand behind join an index, it keeps the index without them beside it
    (`trusted_cases`) and their evidence counts only inside its top window (`anonymous_bounded`);
    the cases verified people stand behind count in full."""
    by_query: dict[str, list[str]] = {}
    for e in exemplars:
        if e.query not in exclude_queries:
            by_query.setdefault(e.query, []).append(e.task_id)
    return tuple(CaseRecord(query, tuple(sorted(tasks)), category=IMPLICIT_CATEGORY, implicit=True) for query, tasks in sorted(by_query.items()))


def trusted_cases(exemplars: Sequence[LearnedExemplar], exclude_queries: frozenset[str] = frozenset()
                  ) -> tuple[CaseRecord, ...] | None:
    """The learned cases verified people stand behind (`learned_cases` of the verified
    exemplars), where anonymous ones are among `exemplars` too: what the index without the
    anonymous cases holds beside the written ones (search.index.SearchIndex.trusted). None when
    every exemplar (not left out) is verified: nothing to bound."""
    kept = [e for e in exemplars if e.query not in exclude_queries]
    if all(e.verified for e in kept):
        return None
    return learned_cases([e for e in kept if e.verified])


def unclicked_digest(queries: Sequence[str]) -> str | None:
    """A stable digest of the unclicked queries a fit used (None: none), as learned_digest."""
    if not queries:
        return None
    return hashlib.sha256(json.dumps(sorted(queries)).encode("utf-8")).hexdigest()[:16]


def learned_digest(exemplars: Sequence[LearnedExemplar]) -> str | None:
    """Names the learned evidence a fit was made with (None without any)."""
    if not exemplars:
        return None
    payload = json.dumps([[e.query, e.task_id] + ([] if e.verified else [False]) for e in exemplars], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class LearnedMemory:
    """The learned exemplars of an index, grouped by task row (like search.exemplars)."""

    texts: tuple[str, ...]
    task_rows: np.ndarray
    group_starts: np.ndarray
    group_rows: np.ndarray
    n_tasks: int
    vectors: np.ndarray | None = None
    floor: float = 0.0     # the cosine of an unrelated query (unrelated_cosine), set with the vectors
    verified: np.ndarray | None = None   # per text: verified people stand behind it (None: every one)

    def with_vectors(self, vectors: np.ndarray | None, floor: float = 0.0) -> "LearnedMemory":
        return LearnedMemory(self.texts, self.task_rows, self.group_starts, self.group_rows, self.n_tasks, vectors,
                             floor, self.verified)

    @property
    def anonymous(self) -> bool:
        """Whether some of its exemplars count on anonymous networks alone."""
        return self.verified is not None and not bool(self.verified.all())

    def people_only(self) -> "LearnedMemory | None":
        """The memory of its verified exemplars alone (vectors and floor kept; None: none), built
        once per memory: what `anonymous_bounded` measures the written evidence with."""
        cached = self.__dict__.get("_people_only", False)
        if cached is not False:
            return cached
        memory = None
        if self.verified is None:
            memory = self
        elif self.verified.any():
            keep = np.flatnonzero(self.verified)
            rows = self.task_rows[keep]
            groups, starts = np.unique(rows, return_index=True)
            memory = LearnedMemory(tuple(self.texts[i] for i in keep), rows, starts.astype(np.int64),
                                   groups.astype(np.int64), self.n_tasks,
                                   None if self.vectors is None else self.vectors[keep], self.floor)
        object.__setattr__(self, "_people_only", memory)
        return memory


FLOOR_PAIRS = 4000


def unrelated_cosine(vectors: np.ndarray, task_rows: np.ndarray, pairs: int = FLOOR_PAIRS) -> float:
    """The mean cosine between exemplars of different tasks (a seeded sample of `pairs` pairs):
    what an embedding model gives two queries that want different things. e5's cosines sit
    around 0.7-0.8 for unrelated text, so "no learned evidence" is this value, not 0."""
    if len(vectors) < 2:
        return 0.0
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, len(vectors), pairs), rng.integers(0, len(vectors), pairs)
    different = task_rows[a] != task_rows[b]
    if not different.any():
        return 0.0
    return float(np.mean(np.sum(vectors[a[different]] * vectors[b[different]], axis=1)))


def build_learned_memory(task_ids: Sequence[str], exemplars: Sequence[LearnedExemplar],
                         exclude_queries: frozenset[str] = frozenset()) -> LearnedMemory | None:
    """The memory of `exemplars` over tasks in `task_ids` order; None when none applies.
    `exclude_queries`: queries left out (the fit's CV leaves out its held-out fold's queries)."""
    row_of = {task_id: row for row, task_id in enumerate(task_ids)}
    per_row: dict[int, list[LearnedExemplar]] = {}
    for e in exemplars:
        row = row_of.get(e.task_id)
        if row is not None and e.query not in exclude_queries:
            per_row.setdefault(row, []).append(e)
    if not per_row:
        return None
    texts, owners, starts, rows, verified = [], [], [], [], []
    for row in sorted(per_row):
        starts.append(len(texts))
        rows.append(row)
        texts.extend(e.query for e in per_row[row])
        verified.extend(e.verified for e in per_row[row])
        owners.extend([row] * len(per_row[row]))
    return LearnedMemory(tuple(texts), np.asarray(owners, dtype=np.int64), np.asarray(starts, dtype=np.int64),
                         np.asarray(rows, dtype=np.int64), len(task_ids), verified=np.asarray(verified, dtype=bool))


# --- what anonymous networks may do (issue 42: a voice is a verified person) -----------------------

#: Evidence that counts on anonymous networks alone counts only for this many tasks at the top of
#: the ranking the trusted evidence (written cases, verified people) gives (`anonymous_bounded`):
#: it lifts a task by at most this many places (docs/security.md).
ANONYMOUS_WINDOW = 3


def anonymous_window(people_scores: np.ndarray, window: int = ANONYMOUS_WINDOW) -> np.ndarray:
    """A mask of the `window` best tasks by `people_scores` (the fused score with the `learned`
    signal of verified exemplars alone): where anonymous evidence may count."""
    kept = np.zeros(people_scores.size, dtype=bool)
    if window > 0 and people_scores.size:
        kept[np.argsort(-people_scores, kind="stable")[:window]] = True
    return kept


def anonymous_bounded(served: np.ndarray, trusted: np.ndarray, trusted_scores: np.ndarray,
                      window: int = ANONYMOUS_WINDOW) -> np.ndarray:
    """One signal with anonymous evidence kept only inside the window,

        x''(q, t) = x(q, t)    if t is among the `window` best by s'(q, .)
                    x'(q, t)   otherwise

    x: the value as served (every learned pair counted); x': as the trusted evidence alone gives
    it (the written cases and the pairs verified people stand behind: people_values in
    search/signal/learned.py, or the index without the anonymous pairs as cases); s': the fused
    score of the x' values
    (search.prefilter.bound_anonymous applies this to every signal that differs). Below the
    window every task keeps its trusted score, so the tasks there keep their trusted order among
    themselves: a task at trusted rank r > window ends at rank r - window or lower, and one in
    the window at 1 or lower. However many networks stand behind them, anonymous pairs lift a
    task by at most `window` places, and a task from below the window into it only by pushing a
    window task down (issue 42: padded cover from 20 networks lifted a wrong task 10 -> 2).
    Where the served and trusted values are equal (no anonymous evidence near the query),
    nothing changes."""
    return np.where(anonymous_window(trusted_scores, window), served, trusted)
