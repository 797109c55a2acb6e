"""The adversarial simulator end to end, its smallest scenario (ops/simulate_attack.py; issue 33
items 1 and 2; docs/learning-from-use.md, section 4).

`cover` with 20 cover queries: a fresh demo (`app.py load-demo`), a real waitress server, 40
widget-shaped cover votes (each "<test-case query> please" searched with k=1 and its top result
clicked, once from each of two /24 networks) and 4 sessions clicking the wrong task at rank 10
for the target query, then `app.py fit` with LEARNING_SETTLE_S=0. The two networks hold half of
the pairs each, over LEARNING_MAX_NETWORK_SHARE, and vouch for none: the wrong task stays where
it was for the query and its two paraphrases. 10-25 s: a server start, a fit that finds nothing
new to weigh, a second start.
"""
from __future__ import annotations

from ops import simulate_attack


def test_the_simulated_cover_attack_from_two_networks_moves_no_ranking(tmp_path, shared_cache_dir):
    args = simulate_attack.build_attack_parser().parse_args([
        "--scenario", "cover", "--cover-queries", "20", "--data-dir", str(tmp_path / "work"),
        "--cache-dir", str(shared_cache_dir)])
    result = simulate_attack.run(args)["scenarios"]["cover"]
    print(simulate_attack.table({"scenarios": {"cover": result}}))

    before = {q: r["rank"] for q, r in result["before"].items()}
    after = {q: r["rank"] for q, r in result["after"].items()}
    assert before[simulate_attack.ATTACK_QUERY] == 10          # the audit's starting point
    assert result["traffic"]["clicks_stored"] == 2 * 20 + 4 and result["traffic"]["refused_429"] == 0
    # every click reached the log and was folded in: the attack pair has its 4 sessions on 2 networks ...
    assert result["attack_pair"]["sessions"] == 4 and result["attack_pair"]["networks"] == 2
    # ... which would count alone, but the two networks hold half the pairs each and vouch for none
    assert result["attack_pair"]["why_not"] == "its networks clicked too many of the pairs"
    assert result["fit"]["pairs_counted"] == 0 and result["fit"]["weight"] == 0
    assert not result["rose"], (before, after)
    for query, rank in after.items():
        assert rank is None or rank > 5, (query, before[query], rank)
        assert result["after"][query]["learned_contribution"] in (None, 0, 0.0)
