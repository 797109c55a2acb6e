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

from typing import Callable

import click
from flask.cli import AppGroup


# Each loader imports its module by name, inside a function (tests/test_layers.py reads every
# import of the product, these included, and no module is looked up by a computed name).
def _corpus() -> click.Command:
    from cli.corpus import corpus_group
    return corpus_group


def _evaluate() -> click.Command:
    from cli.evaluate import evaluate_command
    return evaluate_command


def _evaluate_prefixes() -> click.Command:
    from cli.evaluate import evaluate_prefixes_command
    return evaluate_prefixes_command


def _fit() -> click.Command:
    from cli.fit import fit_command
    return fit_command


def _analytics() -> click.Command:
    from cli.analytics import analytics_group
    return analytics_group


def _llm() -> click.Command:
    from cli.llm import llm_group
    return llm_group


#: Commands imported only when run (or listed by --help): their modules pull in what no other
#: command needs (cli.corpus: the kb/ corpora and their LLM client; cli.evaluate: the evaluation
#: package), which app.py imported for every command, `app.py search` included (issue 44 item 9).
#: Name -> its loader. tests/test_first_steps.py checks each loader's command has that name and
#: that `app.py search` imports none of these modules.
LAZY_COMMANDS: dict[str, Callable[[], click.Command]] = {
    "corpus": _corpus, "evaluate": _evaluate, "evaluate-prefixes": _evaluate_prefixes, "fit": _fit,
    "analytics": _analytics, "llm": _llm,
}


class LazyAppGroup(AppGroup):
    """Flask's app command group, loading LAZY_COMMANDS on first use: click's documented way
    ("Lazily Loading Subcommands": list_commands names them, get_command loads one)."""

    def __init__(self, *args, lazy: dict[str, Callable[[], click.Command]] | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str):
        if cmd_name in self.lazy and cmd_name not in self.commands:
            self.add_command(self.lazy[cmd_name](), cmd_name)
        return super().get_command(ctx, cmd_name)
