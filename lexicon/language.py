"""Which language a text is written in, and each language's stop words and Snowball stemmer.

The catalog is written in one language (CATALOG_LANGUAGE, English here); the embedding model
(multilingual-e5-small) also reads Spanish, Portuguese and French, so people type those. A query
in another language has no word of the catalog's own to share with it: the signals that need
shared words (lexical, typo, rationale, the typed prefix) then say "no evidence" instead of
"evidence against" (search.prefilter, search/signal/), no word is corrected into the catalog's
language (search.query.analyse_query), and the fusion ranks with weights fitted for such
queries (search.ranker.RankerParams.foreign, search.fitting.foreign).

Detection is a rule over the text itself, not a statistical model, chosen by measurement
(docs/results.md, "Queries in other languages"):

    score_L(text) = #{w : w a stop word of L only} + #{w : w ends like L only (SUFFIXES)}
                    + 2 * #{letters only L writes (MARKS: ñ, ã, ç, è, ...)}
                    (+ #{w : the catalog knows w}, for the catalog's language, when `known` is given)

    language(text) = argmax_L score_L, the catalog's language unless another scores strictly more.

Queries are short (1-5 words) and full of the catalog's own acronyms, which n-gram identifiers
misread. Measured on the dev sets of evaluation/data/languages/ and the demo's cases, English
texts read as another language, then queries in another language read as one (foreign or not):

    |                                   | this rule | langdetect 1.0.9 (seeded) |
    | demo held-out, English (44)       | 0         | 16 ("ASQ", "Waitlist", "asthma and seizure care plan") |
    | demo cases, English (258)         | 0         | 77        |
    | CLINC150 val sample, English (160)| 0         | 8         |
    | demo held-out, es / pt (44 each)  | 42 / 43   | 42 / 43   |
    | CLINC150 val sample, es / pt (160)| 156 / 158 | 159 / 159 |

An English query read as foreign loses its lexical evidence, so that error costs the catalog's
own language; the rule makes none and finds as many foreign queries on the demo. (fastText's
identifier downloads its model at run time; Lingua is a 96 MB wheel.) Which of Spanish and
Portuguese a query is matters less (their stems and stop words only): the rule says the right
one for 42 / 44 and 29 / 44 of the demo's, 156 / 160 and 139 / 160 of CLINC150's. The English
texts it reads as another language are 6 of the 18,949 texts of CLINC150 and the demo, all CLINC150's ("is las vegas a safe place
to visit", "how's traffic en route to virginia") and none of the demo's.

Normalisation per language: `stop_words(language)` (English's short list, STOPWORDS; the
Snowball project's lists for the others, accents folded, as lexicon.normalise folds them for
matching; display keeps what the person typed) and `stemmer(language)` (PyStemmer's Snowball
stemmers). Texts are folded and split into words by lexicon.normalise, below this module and
the text pipeline (lexicon.text) that reads it.
"""
from __future__ import annotations

from functools import lru_cache

import Stemmer

from lexicon.normalise import WORD, normalise

#: The language the catalog's tasks are written in: its words are the ones the lexical signals know.
CATALOG_LANGUAGE = "en"
#: The languages detected, the catalog's first.
LANGUAGES = ("en", "es", "pt", "fr")
_SNOWBALL = {"en": "english", "es": "spanish", "pt": "portuguese", "fr": "french"}

# A short English stopword list: function words that carry no task signal. Kept small on
# purpose: "home", "visit", "child" and similar domain words must survive.
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me might more most must my myself no nor not of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    want need needs like please get go going find show see look looking where's whats i'm im
    """.split()
)

# Snowball's stop word lists (snowballstem.org, algorithms/*/stop.txt), shortened, accents folded
# (the text pipeline folds them before matching), plus the request words staff type ("necesito",
# "quero"). English's list is STOPWORDS.
_STOP = {
    "es": """de la que el en y los del se las por un para con una su al lo como mas pero sus le ya o
        este porque esta entre cuando muy sin sobre tambien hasta hay donde quien desde todo nos
        durante todos uno les ni contra otros ese eso ante ellos esto mi antes algunos unos yo otro
        otras otra tanto esa estos mucho quienes nada muchos cual poco ella estar estas algunas algo
        nosotros mis tu te ti tus ellas vosotros os mio mia mios mias tuyo tuya suyo suya nuestro
        nuestra nuestros nuestras esos esas estoy estamos estan es son fue era ser soy eres somos han
        hemos tengo tiene tienen tenemos tener puedo puede pueden puedes hacer hago necesito
        necesitamos quiero queremos cuales cuanto cuanta cuantos cuantas favor como donde ahora aqui
        alli hoy manana ayer solo cada""",
    "pt": """de a o que e do da em um para com nao uma os no se na por mais as dos como mas ao ele das
        seu sua ou quando muito nos ja eu tambem so pelo pela ate isso ela entre depois sem mesmo aos
        seus quem nas me esse eles voce essa num nem suas meu minha numa pelos elas qual lhe deles
        essas esses pelas este dele tu te voces vos lhes meus minhas teu tua teus tuas nosso nossa
        nossos nossas dela delas esta estes estas aquele aquela isto aquilo estou estamos estao tem
        temos tenho foi ser sou era sao preciso precisamos quero queremos posso pode podemos fazer
        quais quanto quantos quantas onde porque pra agora aqui hoje amanha ontem cada""",
    "fr": """le la les de des du un une et en est pour que qui dans sur au aux avec ce ces pas plus par
        je tu il elle nous vous ils elles mon ma mes ton ta tes sa ses notre votre nos vos leur leurs
        ou mais donc comment quand quel quelle quels quelles faire suis ai avons sont etre veux voudrais
        dois doit peux peut besoin cette cet ici aujourd hui demain hier chaque""",
}
# Words that are stop words of a language here but also common English words: no evidence either way.
_SHARED_WITH_ENGLISH = frozenset("""a i o e as on no me he has son era ha do are in is it an am at be by so to
    we us come pour plus sur est te tu nos vos os ni mi ya ante les ces ma sa ta cet des cada solo ser mes ton
    hay pie ai yo todo""".split())

# Endings only one of the languages writes (accents folded): a word unknown to the catalog that
# ends so is evidence for it. English "-tion" never ends in "-cion"/"-cao" once folded.
_SUFFIXES = {
    "es": ("cion", "ciones", "idad", "idades", "mente", "ario", "arios", "adas", "iendo", "itos", "itas",
           "encia", "ancia", "amos", "emos", "imos"),
    "pt": ("cao", "coes", "dade", "dades", "mento", "mentos", "inho", "inha", "agem", "agens", "lho", "lha",
           "nho", "nha", "amos", "emos", "imos"),
    "fr": ("euse", "euses"),
}
# Letters only some of the languages write, as typed (before accents are folded).
_MARKS = {"es": "ñ¿¡", "pt": "ãõç", "fr": "èêëîïûùœç"}
_ACCENTED = "áéíóúâôà"   # written by all three: evidence against the catalog's language only


def stop_words(language: str) -> frozenset[str]:
    """The stop words of `language` (accents folded); English's is STOPWORDS."""
    if language == "en":
        return STOPWORDS
    return _STOP_SETS.get(language, frozenset())


_STOP_SETS = {lang: frozenset(text.split()) for lang, text in _STOP.items()}
# every beginning of a stop word of any language detected ("wha", "th", "qu"): a word still being
# typed that is one of these may yet become a stop word (begins_stop_word)
_STOP_BEGINNINGS = frozenset(word[:n] for words in (STOPWORDS, *_STOP_SETS.values()) for word in words
                             for n in range(1, len(word) + 1))
# the stop words that say "this language" (not shared with English, not common English words)
_CUES = {lang: words - _SHARED_WITH_ENGLISH for lang, words in _STOP_SETS.items()}


def begins_stop_word(fragment: str) -> bool:
    """Whether a stop word of some language detected begins with `fragment` (normalised: lower
    case, accents folded): a word still being typed that may yet be one ("wha", "th", "qu")."""
    return fragment in _STOP_BEGINNINGS or fragment.replace("'", "") in _STOP_BEGINNINGS   # "what'" -> "whats"


@lru_cache(maxsize=None)
def stemmer(language: str) -> Stemmer.Stemmer:
    """The Snowball stemmer of `language` (English for a language without one)."""
    return Stemmer.Stemmer(_SNOWBALL.get(language, "english"))


def language_scores(text: str, known=None, written=None, unfinished: bool = False) -> dict[str, float]:
    """score_L of the module docstring for each of LANGUAGES. `known(word)`: whether the
    catalog knows a (normalised) word: each such word counts for the catalog's language, and a
    word it knows is never a suffix cue. `written(word)`: the language of the catalog's own
    texts (cases, aliases) in other languages that use the word (None: none), a vote for it:
    a Spanish case teaches the catalog that "vacunas" is Spanish. `unfinished`: leave out the
    last word's votes (it is still being typed); its letters' marks still count."""
    head, last = _scores(text, known, written)
    return head if unfinished or last is None else _plus(head, last)


def _scores(text: str, known=None, written=None) -> tuple[dict[str, float], dict[str, float] | None]:
    """(the text's marks and the votes of every word but the last, the last word's votes or None
    for a text without words): language_scores in two parts, each word scored once."""
    tokens = WORD.findall(normalise(text))
    scores = {lang: 0.0 for lang in LANGUAGES}
    if not text.isascii():   # every mark and accent is outside ASCII (most texts of a catalog are inside)
        lowered = text.lower()
        for lang, marks in _MARKS.items():
            scores[lang] += 2.0 * sum(lowered.count(mark) for mark in marks)
        if any(ch in _ACCENTED for ch in lowered):
            for lang in ("es", "pt", "fr"):
                scores[lang] += 1.0
    for token in tokens[:-1]:
        _vote(scores, token, known, written)
    if not tokens:
        return scores, None
    last = {lang: 0.0 for lang in LANGUAGES}
    _vote(last, tokens[-1], known, written)
    return scores, last


def _vote(scores: dict[str, float], token: str, known, written) -> None:
    """Add one word's votes to `scores` (language_scores)."""
    is_known = bool(known is not None and known(token))
    if token in STOPWORDS and token not in _SHARED_WITH_ENGLISH:
        scores["en"] += 1.0
    elif is_known:
        scores["en"] += 1.0
    other = written(token) if written is not None and not is_known else None
    if other is not None:
        scores[other] += 1.0
    for lang, cues in _CUES.items():
        if token in cues:
            scores[lang] += 1.0
        elif not is_known and len(token) > 4 and token.endswith(_SUFFIXES[lang]):
            scores[lang] += 1.0


def _plus(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return {lang: a[lang] + b[lang] for lang in a}


def detect(text: str, known=None, written=None, unfinished: bool = False, hint: str | None = None) -> str:
    """The language of `text` (module docstring): the catalog's unless another one scores
    strictly more. Memoised per text when it is read alone (words, terms call it per text);
    `known`, `written`, `unfinished`: what the catalog knows and whether the last word is still
    being typed (language_scores). `hint`: the language of the page the text was typed on, where
    the asker says (page_language): it decides only where the text shows none (every score 0)."""
    if known is None and written is None and not unfinished and hint is None:
        return _detect_memo(text) if len(text) <= 1000 else _detect(text)
    return _detect(text, known, written, unfinished, hint)


def _detect(text: str, known=None, written=None, unfinished: bool = False, hint: str | None = None) -> str:
    """`unfinished`: the last word is still being typed and may yet become any word ("te" the
    start of "temprana" or of "teacher", "de" of "dental"): the words before it decide where
    they say anything (a score above zero), so that a language once shown by finished words
    stays while the next word is typed; a text of one word still being typed is read whole.
    `hint`: read where no language scores at all ("conteo": nothing but the page says Spanish),
    and the one of two other languages that tie ("grupo de" on a Portuguese page: "de" is a stop
    word of both); never over the catalog's language where it scores as much as the best."""
    head, last = _scores(text, known, written)
    scores = head if last is None or (unfinished and any(head.values())) else _plus(head, last)
    if hint is not None and not any(scores.values()):
        return hint
    best = max(LANGUAGES, key=lambda lang: (scores[lang], lang == CATALOG_LANGUAGE, lang == hint))
    return best if scores[best] > scores[CATALOG_LANGUAGE] else CATALOG_LANGUAGE


def page_language(tag: str | None) -> str | None:
    """The language a page's language tag names (BCP 47, as `<html lang>` writes it: "es",
    "es-MX", "pt-BR"), where it is one of LANGUAGES other than the catalog's; None for the
    catalog's own (a text that shows no language is read in it anyway, so an English page's
    request is the request without a tag, one answer-cache entry), any other language or none.
    Only its primary subtag counts: Mexican and Castilian Spanish share a stemmer and stop words."""
    primary = (tag or "").split("-", 1)[0].lower()
    return primary if primary in LANGUAGES and primary != CATALOG_LANGUAGE else None


_detect_memo = lru_cache(maxsize=16384)(_detect)


def foreign(language: str) -> bool:
    """Whether `language` is not the catalog's: its words are not the catalog's words."""
    return language != CATALOG_LANGUAGE


def in_other_language(text: str) -> bool:
    """Whether `text`, read alone, is written in another language than the catalog's: a case, an
    alias or an exemplar (the rule every part of the index and the fit asks of such a text)."""
    return foreign(detect(text))
