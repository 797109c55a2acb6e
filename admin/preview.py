"""The ranking preview of a catalog or test-case change, shown before the change is published.

The admin asks evaluation.impact for the impact of a change, the catalog as it is (before)
against the catalog as the change would leave it (after): the lexicon links it adds and removes,
the edited queries' and every changed test case's top 5 before and after, the cross-validated
suite figures before and after, the gold a viewer will not see, what "no confident match" can
say (how each is measured: evaluation.impact's docstring). The pages render it
(admin/templates/admin/_preview.html, inside preview.html and the rollback and revert pages).

This module says what each side is, as the service will serve it:

- **before**: the catalog as served now (`service.live()`: its index, test cases and fit);
- **after**: the catalog as the change leaves it, ranked by the fit the service will rank that
  data with once it is published (`after_fit`: SearchService.params_for; after a rollback, the
  fit that data had; nothing is refitted), and whether an automatic refit follows and replaces it;
- **the viewer**: the form's `view_as`, an admin name of a viewer (search.request: ANONYMOUS,
  the default, what the public sees; a role; EVERY_ROLE).

The rankings are the service's own: the same index recipe (search.assembly), pipeline
(search.pipeline) and request of a test case (search.request.SearchRequest.of_case) as
SearchService.search and the case page's "How the search ranks it now".
"""
from __future__ import annotations

from typing import Sequence

from catalog.records import CaseRecord, TaskRecord
from evaluation.impact import ImpactMemo, ImpactReport, Serving, Side, change_impact
from search.fitting import cases_digest
from search.ranker import RankerParams
from search.request import ANONYMOUS, Viewer


def preview_change(service, before_tasks: Sequence[TaskRecord], before_cases: Sequence[CaseRecord],
                   after_tasks: Sequence[TaskRecord], after_cases: Sequence[CaseRecord],
                   queries: Sequence[str], view_as: str | None = ANONYMOUS,
                   memo: ImpactMemo | None = None) -> ImpactReport:
    """The preview of changing (before_tasks, before_cases) into (after_tasks, after_cases);
    `queries`: the edited query or queries; `view_as`: whose rankings (module docstring).
    `service`: a SearchService (its settings, embedder, enrichment and fits are used; it is not
    changed). `memo`: the admin's ImpactMemo (admin.blueprint.AdminState.previews), to answer a
    preview already made from (the same report object)."""
    live = service.live()
    after_params, refit_s = after_fit(service, live, after_tasks, after_cases)
    return change_impact(Serving(service.settings, service.embedder, service.enrichment, live),
                         Side(before_tasks, before_cases, live.params),
                         Side(after_tasks, after_cases, after_params, refit_s),
                         queries, Viewer.named(view_as), memo)


def after_fit(service, live, tasks: Sequence[TaskRecord], cases: Sequence[CaseRecord]
              ) -> tuple[RankerParams, float | None]:
    """The fit the service will rank (`tasks`, `cases`) with once published (the live one for
    the live data, else what SearchService.params_for picks for that data's digest), and
    whether an automatic refit follows and replaces it (SearchService.refit_due): then the
    seconds the newest fit took (0.0 when it did not say), else None (issue 44 item 4)."""
    digest = cases_digest([t for t in tasks if t.active], cases)
    if digest == live.digest:
        return live.params, None
    params, stale = service.params_for(digest)
    if not service.refit_due(cases, stale):
        return params, None
    newest = next(iter(service.source.fits(limit=1)), None)
    return params, float(((newest.report or {}).get("seconds") or 0.0) if newest is not None else 0.0)
