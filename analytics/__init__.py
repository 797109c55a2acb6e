"""Search analytics (issue 10): every search is logged, the widget reports what people did with
the results, and the admin sees the measures and the queries to turn into test cases.

    analytics.records   the plain records (a logged search, an event), search ids, query normalisation
    analytics.formulas  the measures as pure functions over those records (definitions in its docstring)
    analytics.models    the tables (migration 0005); analytics.store reads and writes them
    analytics.recorder  the background writer: bounded queue, batched flushes, retention purge, roll-ups
    analytics.rollup    daily roll-ups (pure): what the admin page reads instead of the raw log
    analytics.budget    flood caps of POST /api/events (per session, per address, everyone; in Redis)
    analytics.schema    validation of POST /api/events against openapi.json
    analytics.charts    server-rendered SVG chart geometry (pure)

`python app.py analytics purge|rollup|report` is cli/analytics.py.

No HTTP here: POST /api/events and the app's wiring of the writer (`init_analytics`) are in
api/events.py, the admin pages under /admin/analytics in admin/analytics/ (create_app registers
both). This package imports nothing, so importing one of its modules loads no web framework.
"""
