"""LLM access for enrichment: the official `openai` client against any OpenAI-compatible server
(OpenAI, vLLM, Ollama, llama.cpp), temperature 0, JSON output validated with jsonschema.

Structured output: the shared infra.chat.ChatClient does the response-format ladder
(json_schema where supported, falling back to json_object + a `schema` key, which llama.cpp turns
into a grammar, then plain json_object when the server rejects it; LLM_RESPONSE_FORMAT=auto|
json_schema|json_object); this module adds the prompts, the schemas and the validation.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

import jsonschema

MAX_DOC_CHARS = 6000

TERMS_SCHEMA = {
    "type": "object",
    "properties": {"terms": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 60},
                             "maxItems": 15}},
    "required": ["terms"],
}
KEYWORDS_SCHEMA = {
    "type": "object",
    "properties": {"keywords": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 80},
                                "minItems": 1, "maxItems": 16}},
    "required": ["keywords"],
}

MODES = ("fact_checking", "question_answering", "argument", "duplicate", "task_catalog")

# Corpus side (SIRA 3.2): anticipate the user's vocabulary that is ABSENT from the document.
DOC_FOCUS = {
    "fact_checking": "Claims that this document supports or refutes will be checked against it. Focus on "
                     "entity aliases, abbreviations and their expansions, alternate names of genes, drugs, "
                     "diseases and methods, and the factual cues a claim would mention.",
    "question_answering": "Questions answered by this document will be asked. Focus on how people phrase such "
                          "questions: synonyms, lay and expert names, abbreviations, related concepts.",
    "argument": "Counter-arguments and arguments on the same debate topic will be matched against this text. "
                "Focus on the topic's vocabulary as used by the opposing side, and its key concepts.",
    "duplicate": "Duplicate questions with the same intent must find this text. Focus on intent-preserving "
                 "synonym substitutions and alternative wordings.",
    "task_catalog": "This is a task (an action a user can perform in an application). Users type short "
                    "requests in their own words. Focus on verbs and nouns users would type to find this task: "
                    "synonyms, colloquial phrasings, abbreviations, and related object names.",
}
# The answer format in words, with no placeholder or example to copy: Gemma 3 270M returned a
# prompt's ["...", "..."] verbatim for every document, and a worked example verbatim too. The
# grammar (or json_schema) enforces the structure; the prompt only has to name it.
FORMAT_NOTE = 'Answer with a JSON object whose "terms" field is the list of your terms.'
DOC_SYSTEM = ("You are a search-vocabulary expert. You propose search terms for a document that are NOT "
              "already in its text, so that a keyword search engine can find it. Answer with JSON only.")
DOC_USER = ("{focus}\n\nPropose up to {n} short search terms or phrases (1-3 words each) that a user might "
            "type to find this document but that do NOT appear in it: synonyms, abbreviations, expansions, "
            "alternate names, domain phrasing. No sentences, no terms copied from the text.\n"
            + FORMAT_NOTE + "\n\nDOCUMENT:\n{doc}")

# Query side (SIRA 3.2): predict evidence vocabulary, never the answer.
QUERY_FOCUS = {
    "fact_checking": "The query is a claim; evidence documents (scientific abstracts) must be found. Propose "
                     "terms a supporting or refuting abstract would use: mechanisms, measures, populations, "
                     "related entities, expanded abbreviations.",
    "question_answering": "The query is a question. Propose the context words around the answer, not the "
                          "answer itself (no guessed names, numbers or dates).",
    "argument": "The query is an argument. Propose vocabulary of the debate topic used by both sides.",
    "duplicate": "The query is a question; propose intent-preserving synonyms and alternative wordings.",
    "task_catalog": "The query is a user request for an application task; propose task vocabulary.",
}
QUERY_SYSTEM = ("You are a search expert. You predict vocabulary that a relevant document would contain but "
                "the query lacks. Never state or guess the answer. Answer with JSON only.")
QUERY_USER = ("{focus}\n\nPropose up to {n} short terms or phrases (1-3 words) absent from the query.\n"
              + FORMAT_NOTE + "\n\nQUERY: {query}")

# SAGE (sec. 5.1 and its Figure 13 prompt): eight keywords per document, prepended.
SAGE_USER = ("Based on the following document content, generate exactly 8 keywords that best represent the "
             "main topics, methods, or contributions of this document.\n\nContent: {doc}\n\n"
             'Return JSON: {{"keywords": ["keyword1", "...", "keyword8"]}}')


def prompt_version(kind: str) -> str:
    """A short hash of the templates a kind of request uses: editing a prompt invalidates its cache."""
    parts = {"doc": [DOC_SYSTEM, DOC_USER, json.dumps(DOC_FOCUS, sort_keys=True), json.dumps(TERMS_SCHEMA)],
             "query": [QUERY_SYSTEM, QUERY_USER, json.dumps(QUERY_FOCUS, sort_keys=True), json.dumps(TERMS_SCHEMA)],
             "sage": [SAGE_USER, json.dumps(KEYWORDS_SCHEMA)]}[kind]
    return hashlib.sha256("\x1e".join(parts + [str(MAX_DOC_CHARS)]).encode()).hexdigest()[:10]


def doc_messages(mode: str, text: str, n: int = 15) -> list[dict]:
    return [{"role": "system", "content": DOC_SYSTEM},
            {"role": "user", "content": DOC_USER.format(focus=DOC_FOCUS[mode], n=n, doc=text[:MAX_DOC_CHARS])}]


def query_messages(mode: str, query: str, n: int = 10) -> list[dict]:
    return [{"role": "system", "content": QUERY_SYSTEM},
            {"role": "user", "content": QUERY_USER.format(focus=QUERY_FOCUS[mode], n=n, query=query)}]


def sage_messages(text: str) -> list[dict]:
    return [{"role": "user", "content": SAGE_USER.format(doc=text[:MAX_DOC_CHARS])}]


class LLMError(RuntimeError):
    pass


@dataclass
class LLMReply:
    data: dict
    prompt_tokens: int = 0
    completion_tokens: int = 0


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.S)


def parse_json(content: str | None) -> dict:
    if not content:
        raise LLMError("empty completion")
    text = _FENCE.sub("", content.strip())
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        m = re.search(r"\{.*\}", text, re.S)
        if m:
            try:
                return json.loads(m.group(0))
            except json.JSONDecodeError:
                pass
        raise LLMError(f"completion is not JSON: {text[:120]!r}")


def request_schema(shape: dict) -> dict:
    """The OpenAI "strict" subset of a shape schema (no length/count bounds) for response_format."""
    def strip(node):
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k not in {"minLength", "maxLength", "minItems", "maxItems"}}
        return node
    out = strip(shape)
    out["additionalProperties"] = False
    return out


class LLM:
    """Thread-safe JSON completions over infra.chat.ChatClient (the official openai client,
    temperature 0, the response-format ladder json_schema -> json_object + schema (llama.cpp
    grammar) -> json_object, stepped down when the server rejects a format and remembered).
    Output is validated with jsonschema against the shape schema; failures raise
    (infra.chat.LLMUnavailable for transport/HTTP errors, LLMError for bad output)."""

    def __init__(self, base_url: str, model: str, api_key: str = "", timeout_s: float = 20.0,
                 response_format: str = "auto", max_tokens: int = 400):
        import openai

        from infra.chat import ChatClient

        self.model = model
        self.max_tokens = max_tokens
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed", timeout=timeout_s,
                                    max_retries=1)
        self._chat = ChatClient(self.client, model, response_format)

    @classmethod
    def from_settings(cls, settings) -> "LLM | None":
        if not settings.llm_base_url:
            return None
        return cls(settings.llm_base_url, settings.llm_model, settings.llm_api_key, settings.llm_timeout_s,
                   getattr(settings, "llm_response_format", "auto"))

    def complete_json(self, messages: list[dict], schema: dict, name: str = "terms") -> LLMReply:
        def render(in_prompt: dict | None) -> list[dict]:
            if in_prompt is None:  # json_schema rung: the server enforces it
                return messages
            extra = "\n\nAnswer with a JSON object matching this JSON schema:\n" + json.dumps(in_prompt)
            return messages[:-1] + [dict(messages[-1], content=messages[-1]["content"] + extra)]

        # Grammar-constrained servers keep the length and count bounds that OpenAI's strict mode
        # rejects: without them a small model repeats terms until it runs out of tokens.
        reply = self._chat.complete(render, request_schema(schema), self.max_tokens, schema_name=name,
                                    grammar_schema={**schema, "additionalProperties": False})
        data = parse_json(reply.content)
        try:
            jsonschema.validate(data, schema)
        except jsonschema.ValidationError as exc:
            raise LLMError(f"JSON does not match schema: {exc.message}") from exc
        return LLMReply(data, reply.prompt_tokens, reply.completion_tokens)
