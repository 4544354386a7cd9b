"""A fake LLM that does every compile task, for ``FakeLLMServer.handler``: it tells the task from
the system prompt, reads the item from the user message (document id and text, cluster id and
member titles, sibling clusters and their members) and answers plausible, valid JSON for it.

    model = CompileModel(malformed_once={"L1-0001"}, garbage_for={"doc-7"})
    with FakeLLMServer("anthropic", handler=model, latency=0.3) as server: ...
    model.answers          # every answered request: task, item, model, usage it was billed
    model.usage_total()    # the sum of the usage fields the server returned

Usage is stated explicitly on every reply (so tests can add it up): the user turn at 4
characters a token as input, the system prompt as a prompt-cache write the first time the server
sees it for a model and a cache read afterwards, the answer at 4 characters a token as output.
``cache_min_tokens`` (model -> tokens, as the API documents each model's minimum cacheable
prefix): a system prompt shorter than its model's minimum is never cached, only billed as input.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from dataclasses import dataclass

from c2s_core.llm import prompts
from tests.fakes.llm_servers import Reply, Request, rate_limited, text

TASKS = {prompts.CARD_SYSTEM: "card", prompts.SUMMARY_L1_SYSTEM: "summary", prompts.SUMMARY_UPPER_SYSTEM: "summary",
         prompts.REPARTITION_SYSTEM: "repartition", prompts.ENTITIES_SYSTEM: "entities"}
_DOC = re.compile(r"Document id: (.+?)\nSource title: (.*?)\n\n<document>\n(.*)\n</document>", re.DOTALL)
_CLUSTER = re.compile(r'<cluster id="([^"]+)"[^>]*>\n(.*?)</cluster>', re.DOTALL)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'-]{3,}")
_NAME = re.compile(r"\b[A-Z][A-Za-z0-9]+(?:[ -][A-Z][A-Za-z0-9]+)*\b")
_COMMON = {"This", "That", "When", "Your", "During", "After", "Before", "With", "From", "Each", "Open", "Select",
           "Click", "Choose", "Note", "Then", "What", "Where", "Which", "There", "These", "They", "Some", "Only"}


@dataclass
class Answer:
    task: str
    item: str  # document id, cluster id, or the first cluster id of a repartition batch
    model: str
    attempt: int  # 1 for the first ask, 2+ for re-asks
    status: int
    usage: dict[str, int] | None  # None for an error reply (not billed)
    valid: bool  # False for a deliberately malformed or garbage answer
    clusters: tuple[str, ...] = ()  # repartition: every cluster id judged


def first_user_text(request: Request) -> str:
    for m in request.messages:
        if m.get("role") == "user":
            content = m.get("content")
            return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
    return ""


def task_of(request: Request) -> str:
    return TASKS[request.system]


class CompileModel:
    def __init__(self, *, malformed_once: set[str] = frozenset(), garbage_for: set[str] = frozenset(),
                 rate_limit_once: set[str] = frozenset(), move_one: bool = True,
                 cache_min_tokens: dict[str, int] | None = None):
        self.cache_min_tokens = dict(cache_min_tokens or {})
        self.malformed_once = set(malformed_once)
        self.garbage_for = set(garbage_for)
        self.rate_limit_once = set(rate_limit_once)
        self.move_one = move_one
        self.answers: list[Answer] = []
        self._seen_prefixes: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    # -- bookkeeping -------------------------------------------------------------------------------
    def valid(self, task: str) -> list[Answer]:
        return [a for a in self.answers if a.task == task and a.valid]

    def requests_for(self, task: str) -> list[Answer]:
        return [a for a in self.answers if a.task == task]

    def usage_total(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for a in self.answers:
            total.update(a.usage or {})
        return {k: total[k] for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")}

    def cost(self) -> float:
        from c2s_core.llm import pricing
        from c2s_core.llm.clients import Usage

        return sum(pricing.cost(a.model, Usage(**a.usage)) for a in self.answers if a.usage)

    # -- serving -----------------------------------------------------------------------------------
    def __call__(self, request: Request) -> Reply:
        task = task_of(request)
        user = first_user_text(request)
        attempt = 1 + sum(1 for m in request.messages if m.get("role") == "assistant")
        model = request.body["model"]
        answer, item, clusters = getattr(self, f"_{task}")(user)
        with self._lock:  # the *_once faults hit the item's first request only
            if item in self.rate_limit_once:
                self.rate_limit_once.discard(item)
                self.answers.append(Answer(task, item, model, attempt, 429, None, False, clusters))
                return rate_limited(retry_after=0.01)
            malformed = item in self.malformed_once
            self.malformed_once.discard(item)
        valid = True
        if item in self.garbage_for:
            reply_text, valid = "I am sorry, I cannot help with that request.", False
        elif malformed:
            reply_text, valid = json.dumps(answer)[:40], False  # cut mid-object: not JSON
        else:
            reply_text = json.dumps(answer)
        usage = self._usage(request, model, reply_text)
        with self._lock:
            self.answers.append(Answer(task, item, model, attempt, 200, usage, valid, clusters))
        return text(reply_text, usage=usage)

    def _usage(self, request: Request, model: str, answer: str) -> dict[str, int]:
        turns = "".join(json.dumps(m.get("content")) for m in request.messages if m.get("role") != "system")
        system = _tokens(request.system)
        if system < self.cache_min_tokens.get(model, 0):
            return {"input_tokens": _tokens(turns) + system, "output_tokens": _tokens(answer) + 1,
                    "cache_read_tokens": 0, "cache_write_tokens": 0}
        with self._lock:
            seen = (model, request.system) in self._seen_prefixes
            self._seen_prefixes.add((model, request.system))
        return {"input_tokens": _tokens(turns), "output_tokens": _tokens(answer) + 1,
                "cache_read_tokens": system if seen else 0, "cache_write_tokens": 0 if seen else system}

    # -- the tasks ---------------------------------------------------------------------------------
    def _card(self, user: str) -> tuple[dict, str, tuple]:
        doc_id, source_title, body = _DOC.search(user).groups()
        lines = [line.strip("# ").strip() for line in body.splitlines() if line.strip()]
        title = source_title if source_title != "(none)" else (lines[0] if lines else doc_id)
        sentence = next((s for s in re.split(r"(?<=[.!?])\s+", " ".join(lines[1:])) if len(s.split()) >= 5), "")
        one_line = (sentence or f"Explains {title}.")[:200]
        phrases = list(dict.fromkeys(w.lower() for w in _WORD.findall(title)))[:3]
        return {"title": title[:110], "one_line": one_line, "phrases": phrases}, doc_id, ()

    def _summary(self, user: str) -> tuple[dict, str, tuple]:
        cluster, level = re.search(r"Cluster (\S+) \(level (\d+)\)", user).groups()
        titles_block = user.split("titles:\n", 1)[1].split("\n\n", 1)[0]
        titles = [line[2:] for line in titles_block.splitlines()
                  if line.startswith("- ") and not line.startswith("- ... and ")]
        lead = titles[0] if titles else cluster
        terms = list(dict.fromkeys(w.lower() for t in titles for w in _WORD.findall(t)))[:8]
        return {
            "title": f"{lead[:60]} and related topics",
            "description": f"Level {level} group covering {'; '.join(titles[:3])}"[:290],
            "summary": (f"Topic area: {lead}. Answers questions like: how to {terms[0] if terms else 'start'}. "
                        f"Key terms: {', '.join(terms[:5])}. Covers: {'; '.join(titles[:3])}")[:400],
            "label": f"{' '.join(lead.split()[:4])} {cluster[-4:]}",
            "key_terms": terms,
        }, cluster, ()

    def _repartition(self, user: str) -> tuple[dict, str, tuple]:
        clusters = _CLUSTER.findall(user)
        ids = tuple(c for c, _ in clusters)
        moves = []
        if self.move_one and len(clusters) >= 2:
            for j, (_, inner) in enumerate(clusters):
                members = re.findall(r"^- (\S+): ", inner, re.MULTILINE)
                if len(members) >= 3:  # move its last listed member to a sibling
                    moves = [{"item_id": members[-1], "to_cluster": ids[1] if j != 1 else ids[0]}]
                    break
        return {"confusable": [], "mixed": [], "moves": moves,
                "notes": f"{len(ids)} clusters look distinct" + (" ; one member moved" if moves else "")}, ids[0], ids

    def _entities(self, user: str) -> tuple[dict, str, tuple]:
        cluster = re.search(r"Part (\S+) \(level", user).group(1)
        excerpts = user.split("Excerpts:", 1)[-1]
        names = [n for n in dict.fromkeys(_NAME.findall(excerpts)) if len(n) > 3 and n not in _COMMON][:6]
        return {"entities": names, "doc_types": ["how-to"]}, cluster, ()


def _tokens(s: str) -> int:
    return (len(s) + 3) // 4
