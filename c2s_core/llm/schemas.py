"""Inputs and outputs of every compile-time LLM task, validated with pydantic.

The same models serve the offline provider and real LLMs: an LLM's JSON answer is parsed into
these, so a malformed answer fails validation with the item's id instead of slipping through.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from ..identifiers import MAX_IDENTIFIER_CHARS, MAX_IDENTIFIERS, MAX_ONE_IDENTIFIER

MAX_PHRASES = 4
MAX_ENTITIES = 12
MAX_DOC_TYPES = 4


class CardInput(BaseModel):
    doc_id: str
    title: str  # the source's title, may be empty
    text: str  # truncated for the prompt
    tail: str = ""  # the rest of the document, read only for its identifiers


class Card(BaseModel):
    title: str = Field(min_length=1, max_length=200)
    one_line: str = Field(min_length=1, max_length=300)
    phrases: list[str] = Field(default_factory=list, max_length=MAX_PHRASES)
    # Exact strings from the text (error codes, API names, options, paths) the title does not show.
    identifiers: list[str] = Field(default_factory=list, max_length=MAX_IDENTIFIERS)

    @field_validator("identifiers")
    @classmethod
    def _code_like(cls, identifiers: list[str]) -> list[str]:
        for identifier in identifiers:
            if not 1 <= len(identifier) <= MAX_ONE_IDENTIFIER or "`" in identifier or "\n" in identifier:
                raise ValueError(f"identifier {identifier!r} must be 1-{MAX_ONE_IDENTIFIER} characters on one "
                                 "line, without backticks")
        if sum(map(len, identifiers)) > MAX_IDENTIFIER_CHARS:
            raise ValueError(f"identifiers must total at most {MAX_IDENTIFIER_CHARS} characters")
        return identifiers

    @field_validator("phrases")
    @classmethod
    def _short_phrases(cls, phrases: list[str]) -> list[str]:
        for phrase in phrases:
            if not 1 <= len(phrase.split()) <= 4:
                raise ValueError(f"phrase {phrase!r} must be 1-4 words")
        return phrases


class MemberExcerpt(BaseModel):
    item_id: str
    title: str
    text: str


class ClusterInput(BaseModel):
    cluster_id: str
    level: int
    size: int  # documents under the cluster
    members: list[MemberExcerpt]  # level 1: ≤15 docs × 600 chars; higher: ≤20 child summaries × 300 chars
    member_titles: list[str]  # every member's title, for routing evidence


class ClusterSummary(BaseModel):
    title: str = Field(min_length=1, max_length=120)
    description: str = Field(min_length=1, max_length=400)  # one routing line: what is in here
    summary: str = Field(min_length=1, max_length=1200)  # topic area, question types, key terms
    label: str = Field(min_length=1, max_length=80)
    key_terms: list[str] = Field(default_factory=list, max_length=16)


class RepartitionCluster(BaseModel):
    cluster_id: str
    title: str
    summary: str
    size: int
    cohesion: float  # mean cosine of members to their centroid
    member_ids: list[str]
    member_titles: list[str]


class SimilarPair(BaseModel):
    a: str
    b: str
    similarity: float  # cosine of the two centroids


class RepartitionInput(BaseModel):
    level: int
    branching: int
    clusters: list[RepartitionCluster]  # ≤60 siblings per call
    similar_pairs: list[SimilarPair]


class Move(BaseModel):
    item_id: str
    to_cluster: str


class RepartitionVerdict(BaseModel):
    confusable: list[tuple[str, str]] = Field(default_factory=list)
    mixed: list[str] = Field(default_factory=list)
    moves: list[Move] = Field(default_factory=list)
    notes: str = ""


class EntitiesInput(BaseModel):
    cluster_id: str
    level: int
    title: str
    summary: str
    texts: list[str]


class Entities(BaseModel):
    entities: list[str] = Field(default_factory=list, max_length=MAX_ENTITIES)
    doc_types: list[str] = Field(default_factory=list, max_length=MAX_DOC_TYPES)
