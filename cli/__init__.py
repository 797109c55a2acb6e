"""The command line's commands, one module per group; app.py registers them on its `cli`
(`python app.py --help` lists them all), the heavier ones by name (LAZY_COMMANDS).

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

import importlib

import click
from flask.cli import AppGroup

#: Commands imported only when run (or listed by --help): their modules pull in what no other
#: command needs (cli.corpus: the kb/ corpora and their LLM client; cli.evaluate: the evaluation
#: package; ~0.5 s of the ~3 s `app.py search` took on the AMD EPYC VM when app.py imported them
#: all; issue 44 item 9). Name -> (module, attribute). tests/test_first_steps.py checks each
#: entry names the command it loads and that `app.py search` imports none of these modules.
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "corpus": ("cli.corpus", "corpus_group"),
    "evaluate": ("cli.evaluate", "evaluate_command"),
    "evaluate-prefixes": ("cli.evaluate", "evaluate_prefixes_command"),
    "fit": ("cli.fit", "fit_command"),
    "analytics": ("cli.analytics", "analytics_group"),
    "llm": ("cli.llm", "llm_group"),
}


class LazyAppGroup(AppGroup):
    """Flask's app command group, loading LAZY_COMMANDS on first use: click's documented way
    ("Lazily Loading Subcommands": list_commands names them, get_command imports one)."""

    def __init__(self, *args, lazy: dict[str, tuple[str, str]] | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str):
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, attribute = self.lazy[cmd_name]
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)
