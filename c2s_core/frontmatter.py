"""YAML frontmatter of navigation files, written and checked against the Agent Skills rules,
so a compiled tree loads unchanged in Claude Code and the Skills API."""

from __future__ import annotations

import re

import yaml

NAME_RULE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
RESERVED_WORDS = ("anthropic", "claude")
MAX_NAME, MAX_DESCRIPTION = 64, 1024
_XML_TAG = re.compile(r"<[^>]*>")
ALLOWED_KEYS = {"name", "description", "metadata", "license", "allowed-tools", "compatibility"}


def render_frontmatter(name: str, description: str, metadata: dict) -> str:
    body = {"name": name, "description": clean_description(description), "metadata": metadata}
    return "---\n" + yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=1000) + "---\n"


def clean_description(text: str) -> str:
    text = " ".join(_XML_TAG.sub("", text).split())
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1].rsplit(" ", 1)[0] + "…"


def parse_frontmatter(text: str) -> dict:
    if not text.startswith("---\n"):
        raise ValueError("no frontmatter: the file must start with '---'")
    end = text.find("\n---\n", 4)
    if end < 0:
        raise ValueError("frontmatter is not closed by '---'")
    data = yaml.safe_load(text[4:end])
    if not isinstance(data, dict):
        raise ValueError("frontmatter is not a YAML mapping")
    return data


def frontmatter_problems(text: str, directory_name: str) -> list[str]:
    """Every way a nav file's frontmatter breaks the rules (empty list: valid)."""
    try:
        data = parse_frontmatter(text)
    except (ValueError, yaml.YAMLError) as exc:
        return [str(exc).splitlines()[0]]
    problems = []
    name = data.get("name")
    if not isinstance(name, str) or not name:
        problems.append("name missing")
    else:
        if len(name) > MAX_NAME:
            problems.append(f"name longer than {MAX_NAME} chars")
        if not NAME_RULE.match(name):
            problems.append(f"name {name!r} must be lowercase letters, digits and single inner hyphens")
        if any(word in name for word in RESERVED_WORDS):
            problems.append(f"name {name!r} contains a reserved word")
        if name != directory_name:
            problems.append(f"name {name!r} differs from its directory {directory_name!r}")
    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        problems.append("description missing or empty")
    else:
        if len(description) > MAX_DESCRIPTION:
            problems.append(f"description longer than {MAX_DESCRIPTION} chars")
        if _XML_TAG.search(description):
            problems.append("description contains XML tags")
    extra = set(data) - ALLOWED_KEYS
    if extra:
        problems.append(f"fields {sorted(extra)} must go under metadata:")
    return problems
