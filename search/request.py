"""What a search request means: one object that everything ranking a query builds the same way.

A `SearchRequest` is the query text and everything besides it that changes its ranking:

- the **viewer** (`Viewer`): the verified roles whose restricted tasks it may see, or every
  active task (`restrict=False`: the evaluation's and cross-validation's convention, the admin's
  "every role");
- the **typing meaning** (`Meaning`): whether a space was typed after the last word
  (`finished`: it is read as a whole word, not the start of one), whether the query is still
  being typed (`typing`: True or False where the asker knows; None: the prefilter reads it from
  the text, search.typed.unfinished), and the language of the page it was typed on (`language`,
  one of lexicon.language.LANGUAGES or None: the query's language where its text shows none,
  search.query.query_language);
- the **options**: how many tasks to rank (`k`), whether a test case's exact query pins its
  gold first (`pins`), and whether the ranking says which words matched where (`explain`);
- the **sequence** (`held`, `quiet`): the task ids the person sees now, when the text extends the
  text they answer and is still being typed, and whether what was typed since adds no word that
  can speak (search.sequence: a task on screen is not withdrawn unless the new characters speak
  against it). Empty for a submitted text and for every test case.

Two constructors say what a text is, so that the same text means the same thing wherever it is
ranked (issue 45: a test case of 8 characters or fewer was "still being typed" in the admin's
preview and the fit's cross-validation but submitted in the evaluation):

- `SearchRequest.typed(text, ...)`: a text as the widget or the API sends it; a trailing space
  finishes the last word, `typing` is what the asker said (the widget's Enter says False);
- `SearchRequest.of_case(query, ...)`: a test case's query. A test case is a query a person
  submitted, so it is never "still being typed": `typing=False`, in the serving index's case
  page, the change preview, the fit's cross-validation and the evaluation alike. The prefixes
  a person types on the way to it (the typing fit's cuts, the prefix evaluation's keystrokes)
  are typed texts: `typed`.

The request is a tuple (NamedTuples all the way down): hashed and compared in C, it is the key
of the service's answer cache (serving.answer_cache) as it is.
"""
from __future__ import annotations

from typing import Collection, NamedTuple

from search.sequence import MAX_HELD, extends, is_quiet, same_word

#: The admin's names for a viewer (the preview's "view the rankings as" choice, its form value):
#: the public (no role token), or every role; any other name is one role.
ANONYMOUS = ""
EVERY_ROLE = "*"


class Viewer(NamedTuple):
    """Whose ranking: the tasks of search.index.SearchIndex.visible(roles, restrict)."""

    roles: frozenset[str] = frozenset()   # verified roles whose restricted tasks it may see
    restrict: bool = True                 # False: every active task, whatever its roles

    @classmethod
    def named(cls, view_as: str | None) -> Viewer:
        """The viewer of an admin name: ANONYMOUS (or None), EVERY_ROLE, or a role."""
        if view_as == EVERY_ROLE:
            return EVERYONE
        return cls(frozenset({view_as}) if view_as else frozenset(), True)

    @property
    def name(self) -> str:
        """The admin name of this viewer (`named`'s inverse for the viewers it makes)."""
        if not self.restrict:
            return EVERY_ROLE
        return next(iter(sorted(self.roles)), ANONYMOUS)

    @property
    def label(self) -> str:
        """How a page names this viewer."""
        if not self.restrict:
            return "a user with every role"
        if self.roles:
            return f"a user with the role {', '.join(sorted(self.roles))!r}"
        return "an anonymous user (the public)"

    def visible(self) -> tuple[frozenset[str] | None, bool]:
        """(roles, restrict) as search.index.SearchIndex.visible takes them."""
        return (self.roles or None), self.restrict


#: What the public sees: unrestricted tasks only.
PUBLIC = Viewer()
#: Every active task (the evaluation's and cross-validation's viewer; the admin's "every role").
EVERYONE = Viewer(frozenset(), False)


class Meaning(NamedTuple):
    """How a text is read: `finished`, a space was typed after its last word; `typing`, whether
    it is still being typed where the asker knows (None: the prefilter's reading of the text);
    `language`, the language of the page it was typed on where the asker says (None: the
    catalog's, as for any text that shows no language)."""

    finished: bool = False
    typing: bool | None = None
    language: str | None = None


class SearchRequest(NamedTuple):
    """One query to rank, and everything besides its text that changes the ranking (module docstring)."""

    query: str                      # stripped: the trailing space is `meaning.finished`
    viewer: Viewer = PUBLIC
    meaning: Meaning = Meaning()
    k: int = 10                     # how many tasks to rank
    pins: bool = True               # a test case's exact query pins its gold first
    explain: bool = True            # with the word-level matches and what use added
    held: tuple[str, ...] = ()      # task ids on screen that typing this text extends (search.sequence)
    quiet: bool = False             # with `held`: the typing since adds no word that can speak (sequence.is_quiet)
    same_word: bool = False         # with `held`: all typed since is the word still being typed (sequence.same_word)

    @classmethod
    def typed(cls, text: str, viewer: Viewer = PUBLIC, k: int = 10, typing: bool | None = None,
              pins: bool = True, explain: bool = True, after: str | None = None,
              shown: Collection[str] = (), language: str | None = None) -> SearchRequest:
        """`text` as the widget or the API sends it: a trailing space finishes its last word;
        `typing` as the asker says (None: read from the text). `after` and `shown`: the text
        whose answer is on screen and the task ids it shows; they are held (`held`) only when
        `text` extends `after` and is not submitted (`typing` False: judged on its own, whole),
        `quiet` where what was typed since adds no word that can speak, and `same_word` where all of
        it belongs to the word still being typed (search.sequence). `language`: the page's language
        (lexicon.language.page_language: one of LANGUAGES, or None)."""
        held = (tuple(sorted(set(shown)))[:MAX_HELD]
                if shown and typing is not False and extends(text, after) else ())
        return cls(text.strip(), viewer, Meaning(text[-1:].isspace(), typing, language), k, pins, explain, held,
                   bool(held) and is_quiet(text, after), bool(held) and same_word(text, after))

    @classmethod
    def of_case(cls, query: str, viewer: Viewer = EVERYONE, k: int = 10, pins: bool = True,
                explain: bool = True) -> SearchRequest:
        """A test case's query: submitted, never still being typed (module docstring)."""
        return cls.typed(query, viewer, k, typing=False, pins=pins, explain=explain)
