"""The command line's commands, one module per group; app.py registers them on its `cli`
(`python app.py --help` lists them all).

    cli.accounts   `users ...` and `tokens ...`: admin accounts, API tokens, role tokens
    cli.analytics  `analytics purge|rollup|report`
    cli.catalog    `import-catalog`, `import-cases`, `export-catalog`, `export-cases`, `load-demo`, `db ...`
    cli.corpus     `corpus ...`: the kb/ document corpora (ingest, search, enrich, evaluate)
    cli.evaluate   `evaluate` and `evaluate-prefixes`: offline evaluation
    cli.fit        `fit`: the per-catalog ranker fit
    cli.llm        `llm serve`: the local llama.cpp server

They sit in the app layer, beside app.py (tests/test_layers.py): a command drives the code of
several layers below it (a store, the search service, the evaluation) through Flask's app
context, so none of it lives in the package it drives. `app.py search` and `app.py serve` stay in
app.py, with the app factory they start.
"""
