"""The command line's commands, one module per group; app.py registers them on its `cli`
(`python app.py --help` lists them all), the heavier ones by name (LAZY_COMMANDS).

    cli.accounts   `users ...` and `tokens ...`: admin accounts, API tokens, role tokens
    cli.analytics  `analytics purge|rollup|report`
    cli.catalog    `import-catalog`, `import-cases`, `export-catalog`, `export-cases`, `load-demo`, `db ...`
    cli.corpus     `corpus ...`: the kb/ document corpora (ingest, search, enrich, evaluate)
    cli.evaluate   `evaluate` and `evaluate-prefixes`: offline evaluation
    cli.fit        `fit`: the per-catalog ranker fit
    cli.llm        `llm serve`: the local llama.cpp server
    cli.search     `search`: one search from the shell, run without Flask (app.main)
    cli.group      the Flask command group app.py runs every other command in, and `serve`

They sit in the app layer, beside app.py (tests/test_layers.py): a command drives the code of
several layers below it (a store, the search service, the evaluation) through Flask's app
context, so none of it lives in the package it drives. This file imports no Flask (the modules
that use it import it themselves), so that `app.py search` (cli.search) never loads it.
"""

import click


#: Commands imported only when run (or listed by --help): their modules pull in what no other
#: command needs (cli.corpus: the kb/ corpora and their LLM client; cli.evaluate: the evaluation
#: package; cli.catalog: the import formats and their JSON schema validation), which app.py
#: imported for every command, `app.py search` included (issue 44 item 9).
#: tests/test_first_steps.py checks each loads the command of its name and that `app.py search`
#: imports none of their modules.
CATALOG_COMMANDS = frozenset({"import-catalog", "import-cases", "export-catalog", "export-cases", "db", "load-demo"})
ACCOUNT_COMMANDS = frozenset({"users", "tokens"})
LAZY_COMMANDS = frozenset({"corpus", "evaluate", "evaluate-prefixes", "fit", "analytics", "llm",
                           *CATALOG_COMMANDS, *ACCOUNT_COMMANDS})


def load_command(name: str) -> click.Command:
    """The LAZY_COMMANDS command `name`, its module imported now (by its literal name:
    tests/test_layers.py reads every import, and no module is looked up by a computed name)."""
    if name == "corpus":
        from cli.corpus import corpus_group as command
    elif name == "evaluate":
        from cli.evaluate import evaluate_command as command
    elif name == "evaluate-prefixes":
        from cli.evaluate import evaluate_prefixes_command as command
    elif name == "fit":
        from cli.fit import fit_command as command
    elif name == "analytics":
        from cli.analytics import analytics_group as command
    elif name == "llm":
        from cli.llm import llm_group as command
    elif name in CATALOG_COMMANDS:
        from cli.catalog import COMMANDS
        command = next(c for c in COMMANDS if c.name == name)
    elif name in ACCOUNT_COMMANDS:
        from cli.accounts import COMMANDS
        command = next(c for c in COMMANDS if c.name == name)
    else:
        raise KeyError(name)
    return command
