"""The admin lexicon editor (issue 9): accounts, sessions, access policy, pages and the editor.

    admin.blueprint  the /admin blueprint (a new one per app), its deny-by-default policy, sessions and CSRF
    admin.routes     install_admin: the view modules attach their routes to that blueprint, the app registers it
    admin.views      login, dashboard, tasks and test cases, /admin/api JSON
    admin.editor     the lexicon editor: edit/preview/publish, conflicts, versions, rollback,
                     import/export, and their /admin/api JSON
    admin.learned    each task's learned evidence in the editor: make it a test case, block/unblock
    admin.editing    the editor's pure middle: proposals from forms/JSON, the catalog after a change
    admin.searching  the product's search inside the admin (picker, browse search box)
    admin.evaluation_views  the offline evaluation page (background runs, progress, report, chart)
    admin.analytics  the search analytics pages under /admin/analytics (charts; top, no-result, low-CTR queries)
    admin.completions  what the search box offers as people type, what is about to be, block lists
    admin.accounts   users, roles, argon2 passwords, API tokens
    admin.audit      the audit log helper
    admin.throttle   login throttling

create_app registers the admin (`admin.routes.install_admin`) when it serves pages: each view
module attaches its routes in its `register(pages, api)`, called there. Importing `admin` or any
of its modules registers nothing, and its light modules (audit, accounts) pull in none of the
pages, so a command-line run that needs no routes does not pay for them (issue 44 item 9).
`python app.py users ...` and `tokens ...` are cli/accounts.py.
"""
