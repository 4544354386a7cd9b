"""Prompts for the compile tasks, written for routing: every summary is read by a navigating
agent deciding where to look, so it must name the topic area, the questions answered, the
distinctive identifiers and terms, and member titles - never generic filler.

Each task has a stable system prompt (cached by the Anthropic client) and a user message built
from the task's input model. Answers are JSON only, parsed into ``schemas``. A prompt's version
is part of the per-item cache key (``RemoteProvider.prompt_version``): change the wording of a
prompt, bump its version, and exactly the items of that task are recomputed.
"""

from __future__ import annotations

import functools
import json

from pydantic import BaseModel

from ..identifiers import MAX_IDENTIFIERS
from .schemas import (
    MAX_DOC_TYPES,
    MAX_ENTITIES,
    MAX_PHRASES,
    CardInput,
    ClusterInput,
    EntitiesInput,
    RepartitionInput,
)

VERSIONS = {"card": "card-2", "summary": "summary-1", "repartition": "repartition-1", "entities": "entities-1"}

# Output budgets (tokens). The card budget is the method's: ≤250 output tokens.
MAX_TOKENS = {"card": 250, "summary": 700, "repartition": 2000, "entities": 300}

MAX_TITLES_SHOWN = 40  # member titles listed in a summary prompt

_JSON_ONLY = ("Answer with the JSON object only: no prose before or after it, no code fences, no comments. "
              "Escape quotes inside strings.")

CARD_SYSTEM = f"""You write index cards for the documents of a knowledge base. An AI agent later browses a \
directory tree of these cards to decide which documents to open for a user's question, reading only the card, \
so a card must say precisely what the document covers and which questions it answers.

Return a JSON object with exactly these keys:
{{"title": "...", "one_line": "...", "phrases": ["...", "..."], "identifiers": ["...", "..."]}}

- title: the document's own title when the source gives a meaningful one (keep it, cleaned of markup); \
otherwise a specific title of at most 12 words naming its subject. At most 120 characters.
- one_line: one sentence of at most 30 words saying what the document explains or lets the reader do - the \
task, problem, rule or fact it covers - with its most distinctive specifics (product and feature names, \
settings, error codes, limits). Do not start with "This document" or "This article".
- phrases: up to {MAX_PHRASES} key phrases, each 1 to 4 words, that a user might type and that set this \
document apart from similar ones: specific names, settings, error messages, formats. No generic words such as \
"guide", "help", "overview", "information".
- identifiers: up to {MAX_IDENTIFIERS} exact strings from the text that a user would copy into a question and that the title does not contain: error codes (E0425, ERR_CONNECTION_REFUSED, SQLSTATE 42P01), function, API and command names (pg_dump, os.path.join(), git rev-parse), options (--no-verify), settings and config keys (max_connections), environment variables (PGDATA), file paths (/etc/fstab). Each as written, without backticks, at most 40 characters, 80 in all; the rarest and most specific first. Never plain English words; [] when the text has none.

Keep product names, identifiers and codes exactly as written in the document. Write in the document's \
language. State only what the text supports. {_JSON_ONLY}"""

SUMMARY_L1_SYSTEM = f"""You summarise one cluster of related documents for a navigation tree over a knowledge \
base. An AI agent reads only your summary, never the documents, to decide whether the answer to a user's \
question lies in this cluster or in one of its siblings. Write a routing signpost: specific, distinctive and \
faithful to the documents.

Return a JSON object with exactly these keys:
{{"title": "...", "description": "...", "summary": "...", "label": "...", "key_terms": ["..."]}}

- title: the cluster's topic area in at most 80 characters, specific (e.g. "Online store shipping rules and \
delivery regions"), never generic ("Miscellaneous", "General help", "Various topics").
- description: one routing line of at most 300 characters: what is in here and when to look here, naming two \
to four distinctive things.
- summary: at most 1000 characters, in four labelled parts:
  "Topic area: ..." what these documents are about, in one sentence;
  "Answers questions like: ..." two to four concrete kinds of question these documents answer (how to do X, \
why Y fails, what the limits of Z are ...);
  "Key terms: ..." the distinctive identifiers that occur here - product, feature and plan names, settings, \
error codes, file formats;
  "Covers: ..." several member document titles, verbatim, separated by semicolons.
- label: a short filesystem-safe name: lowercase words joined by hyphens, at most 50 characters (e.g. \
"store-shipping-delivery").
- key_terms: up to 12 distinctive terms copied exactly as they appear in the documents.

Prefer what distinguishes this cluster from neighbouring clusters over what every document of the knowledge \
base shares. State only what the documents support. {_JSON_ONLY}"""

SUMMARY_UPPER_SYSTEM = f"""You summarise one branch of a navigation tree over a knowledge base. The branch \
groups several sub-groups, each given by its own summary. An AI agent reads only your summary to decide \
whether to descend into this branch or a sibling branch for a user's question, so it must show the whole \
range of the branch and what sets it apart.

Return a JSON object with exactly these keys:
{{"title": "...", "description": "...", "summary": "...", "label": "...", "key_terms": ["..."]}}

- title: the branch's topic area in at most 80 characters, broad enough to cover every sub-group yet \
specific (e.g. "Online store: products, orders, shipping and payments"), never generic ("Miscellaneous", \
"Other topics").
- description: one routing line of at most 300 characters: what the branch covers and when to look here, \
naming its main sub-topics.
- summary: at most 1000 characters, in four labelled parts:
  "Topic area: ..." what the branch is about, in one sentence;
  "Answers questions like: ..." the kinds of question its sub-groups answer, concretely;
  "Key terms: ..." the distinctive identifiers across the sub-groups - product, feature and plan names, \
settings, error codes, file formats;
  "Covers: ..." the sub-group titles, verbatim, separated by semicolons.
- label: a short filesystem-safe name: lowercase words joined by hyphens, at most 50 characters.
- key_terms: up to 12 distinctive terms copied exactly as they appear in the sub-group summaries.

Every sub-group must be reachable from your summary: do not describe only the largest ones. State only what \
the sub-group summaries support. {_JSON_ONLY}"""

REPARTITION_SYSTEM = f"""You audit one level of a topic hierarchy built by clustering, before it is used for \
navigation. You see sibling clusters, each with its id, title, routing summary, size (documents under it) and \
cohesion (mean cosine similarity of its members to the cluster centre: lower means looser), and the pairs of \
clusters whose centres are most similar. An AI agent must be able to pick the right cluster for a question \
from the summaries alone. Flag what would mislead it:

- confusable: pairs of clusters that cover the same topic, so that an agent could not tell which one holds an \
answer. Each pair will be merged (or rebalanced if large).
- mixed: clusters that bundle several unrelated topics, so no single summary can route to all of them. Each \
will be split in two.
- moves: single members clearly placed in the wrong cluster, with the cluster where they belong. Only for \
members listed with their titles; use the ids exactly as listed.

Be conservative: a good level needs few or no changes, each cluster is changed at most once, and a needless \
change costs more than a missed one. Flag only clear cases, and use only the ids shown.

Return a JSON object with exactly these keys:
{{"confusable": [["cluster_id_a", "cluster_id_b"]], "mixed": ["cluster_id"], \
"moves": [{{"item_id": "member_id", "to_cluster": "cluster_id"}}], "notes": "one or two sentences on what \
you found and why"}}
Use empty lists when nothing needs changing. {_JSON_ONLY}"""

ENTITIES_SYSTEM = f"""You extract the named entities of one part of a knowledge base for an entity index. \
When a user's question names an entity, the index sends the navigating agent to the parts of the knowledge \
base that mention it, so the entities must be the specific names a question would use.

Return a JSON object with exactly these keys:
{{"entities": ["..."], "doc_types": ["..."]}}

- entities: up to {MAX_ENTITIES}, most important first: product, feature, app, integration and plan names, \
error codes and messages, file formats, settings, standards, organisations and other proper nouns. Copy each \
exactly as written (same spelling and capitalisation). No generic words ("account", "settings", "page", \
"help"), no duplicates, no variants of one entity.
- doc_types: up to {MAX_DOC_TYPES} short lowercase tags for the kinds of document here, preferably from: \
how-to, troubleshooting, reference, policy, billing, faq, concept.

{_JSON_ONLY}"""

REASK_INVALID = ("Your answer could not be used: {error}\n"
                 "Reply again with only the corrected JSON object, in exactly the format asked for.")
REASK_TRUNCATED = ("Your answer was cut off at the output limit before the JSON object was complete. Reply again "
                   "with the complete JSON object, and keep every field shorter.")


# -- user messages ---------------------------------------------------------------------------------


def card_message(item: CardInput) -> str:
    return (f"Document id: {item.doc_id}\n"
            f"Source title: {item.title or '(none)'}\n\n"
            f"<document>\n{item.text}\n</document>\n\n"
            "Write the card for this document as JSON.")


def summary_message(item: ClusterInput) -> str:
    upper = item.level > 1
    kind = "sub-group" if upper else "document"
    count = f"{len(item.member_titles)} sub-groups, {item.size} documents in all" if upper else (
        f"{len(item.member_titles)} documents")
    parts = [f"Cluster {item.cluster_id} (level {item.level}): {count}.", ""]
    shown = item.member_titles[:MAX_TITLES_SHOWN]
    more = len(item.member_titles) - len(shown)
    parts.append(f"All {kind} titles:")
    parts += [f"- {t}" for t in shown]
    if more > 0:
        parts.append(f"- ... and {more} more")
    parts += ["", f"{'Sub-group summaries' if upper else 'Document excerpts'} (most central first):"]
    for m in item.members:
        parts.append(f'<{kind} id="{m.item_id}" title="{_attr(m.title)}">\n{m.text}\n</{kind}>')
    parts += ["", f"Write the {'branch' if upper else 'cluster'} summary as JSON."]
    return "\n".join(parts)


def repartition_message(item: RepartitionInput) -> str:
    with_titles = any(c.member_titles for c in item.clusters)
    parts = [f"Level {item.level} of the hierarchy, {len(item.clusters)} sibling clusters (target size about "
             f"{item.branching} members each).", ""]
    for c in item.clusters:
        parts.append(f'<cluster id="{c.cluster_id}" size="{c.size}" cohesion="{c.cohesion:.3f}">')
        parts.append(f"Title: {c.title}")
        parts.append(f"Summary: {c.summary}")
        if with_titles:
            parts.append("Members:")
            parts += [f"- {mid}: {title}" for mid, title in zip(c.member_ids, c.member_titles)]
            if len(c.member_ids) > len(c.member_titles):
                parts.append(f"- ... and {len(c.member_ids) - len(c.member_titles)} more")
        parts.append("</cluster>")
    if item.similar_pairs:
        parts += ["", "Most similar pairs of cluster centres (cosine):"]
        parts += [f"- {p.a} ~ {p.b}: {p.similarity:.3f}" for p in item.similar_pairs]
    if not with_titles:
        parts += ["", "Member titles are not shown at this level, so leave \"moves\" empty."]
    parts += ["", "Give your verdict as JSON."]
    return "\n".join(parts)


def entities_message(item: EntitiesInput) -> str:
    parts = [f"Part {item.cluster_id} (level {item.level}): {item.title}", "", f"Summary: {item.summary}", "",
             "Excerpts:"]
    parts += [f"<excerpt>\n{t}\n</excerpt>" for t in item.texts]
    parts += ["", "List its entities and document types as JSON."]
    return "\n".join(parts)


def _attr(text: str) -> str:
    return json.dumps(text)[1:-1]


def build(task: str, item: BaseModel) -> tuple[str, str]:
    """(system prompt, user message) for one item of ``task``."""
    if task == "card":
        return CARD_SYSTEM, card_message(item)  # type: ignore[arg-type]
    if task == "summary":
        system = SUMMARY_UPPER_SYSTEM if item.level > 1 else SUMMARY_L1_SYSTEM  # type: ignore[attr-defined]
        return system, summary_message(item)  # type: ignore[arg-type]
    if task == "repartition":
        return REPARTITION_SYSTEM, repartition_message(item)  # type: ignore[arg-type]
    if task == "entities":
        return ENTITIES_SYSTEM, entities_message(item)  # type: ignore[arg-type]
    raise ValueError(f"unknown compile task {task!r}")


def estimate_tokens(text: str) -> int:
    """Tokens in ``text``: ``tiktoken``'s count when it is installed with its encoding at hand, else
    4 characters a token (close for English prose on current Claude and GPT tokenizers)."""
    encoding = _tokenizer()
    return len(encoding.encode(text, disallowed_special=())) if encoding is not None else (len(text) + 3) // 4


@functools.lru_cache(maxsize=1)
def _tokenizer():
    try:
        import tiktoken

        return tiktoken.get_encoding("cl100k_base")
    except Exception:  # noqa: BLE001 - not installed, or its encoding file cannot be fetched offline
        return None


def describe(task: str, item: BaseModel) -> str:
    """The item, named for an error message."""
    if task == "card":
        return f"document {item.doc_id}"  # type: ignore[attr-defined]
    if task == "repartition":
        ids = [c.cluster_id for c in item.clusters]  # type: ignore[attr-defined]
        shown = ", ".join(ids[:5]) + (f", … ({len(ids)} in all)" if len(ids) > 5 else "")
        return f"level-{item.level} sibling batch [{shown}]"  # type: ignore[attr-defined]
    return f"cluster {item.cluster_id}"  # type: ignore[attr-defined]
