"""Synthetic compiled trees, written in the compiler's layout and row formats without a compile:
any number of skills, documents and description lengths, for tests that need shapes the sample
corpora do not have (thousands of rows, over-long descriptions, reserved words in names).

    write_tree(root, {"billing": {"refunds": ["d1", "d2"]}, "flat": {"": ["d3"]}}, docs)

A skill maps group → doc ids; the group ``""`` puts its documents straight into SKILL.md (a
level-1 skill). Each skill lists up to 3 example documents and links the next skill as related;
each group's INDEX.md carries an ``@see`` stub to the first document of the next skill.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from c2s_core.docstore import StoredDocument, write_document_store
from c2s_core.frontmatter import render_frontmatter
from c2s_core.layout import (SECTION_DOCUMENTS, SECTION_EXAMPLES, SECTION_RELATED, SECTION_SEE_ALSO,
                                 SECTION_SUBGROUPS)
from c2s_core.atomic_publish import MARKER_FILE
from c2s_core.navrows import DocCard, doc_row, doc_stub


def documents(n: int, prefix: str = "doc", size: int = 200) -> dict[str, tuple[str, str]]:
    """``n`` documents id → (title, text) of about ``size`` characters each."""
    out = {}
    for i in range(n):
        sentence = f"Article {prefix} {i} explains setting number {i} and what it changes. "
        out[f"{prefix}/{i:04d}.md"] = (f"{prefix.title()} article {i}", (sentence * (size // len(sentence) + 1))[:size])
    return out


def write_tree(root: Path, skills: dict[str, dict[str, list[str]]], docs: dict[str, tuple[str, str]], *,
               corpus: str = "synthetic", descriptions: dict[str, str] | None = None,
               frontmatter_names: dict[str, str] | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    descriptions = descriptions or {}
    names = list(skills)
    cards = {d: DocCard(d, t, text.split(". ")[0][:100], ["setting", "article"]) for d, (t, text) in docs.items()}
    doc_paths, manifest_skills = {}, []
    for i, (skill, groups) in enumerate(skills.items()):
        folder = root / "skills" / skill
        folder.mkdir(parents=True, exist_ok=True)
        members = [d for ids in groups.values() for d in ids]
        other = names[(i + 1) % len(names)] if len(names) > 1 else None
        other_first = next(iter(d for ids in skills[other].values() for d in ids), None) if other else None
        description = descriptions.get(skill, f"{skill.replace('-', ' ').title()}: {len(members)} documents on "
                                              f"settings and articles.")
        fm_name = (frontmatter_names or {}).get(skill, skill)
        level = 1 if list(groups) == [""] else 2
        lines = [render_frontmatter(fm_name, description, {"level": level, "documents": len(members),
                                                           "skill_path": f"skills/{skill}"}),
                 f"# {skill.replace('-', ' ').title()}\n", f"Topic area: {skill}. Key terms: setting, article.\n"]
        if level == 1:
            lines.append(f"{SECTION_DOCUMENTS} ({len(members)})\n")
            lines += [doc_row(cards[d]) for d in members]
            for d in members:
                doc_paths[d] = f"skills/{skill}/SKILL.md"
        else:
            lines.append(f"{SECTION_SUBGROUPS} ({len(groups)})\n")
            for group, ids in groups.items():
                lines.append(f"- [{group}]({group}/INDEX.md) ({len(ids)} docs) — {group} articles")
                _write_index(folder / group, group, ids, cards, other, other_first, skills)
                for d in ids:
                    doc_paths[d] = f"skills/{skill}/{group}/INDEX.md"
        lines.append(f"\n{SECTION_EXAMPLES}\n")
        lines += [doc_row(cards[d]) for d in members[:3]]
        if other:
            lines.append(f"\n{SECTION_RELATED}\n")
            lines.append(f"- [{other}](../{other}/SKILL.md) — shared: Settings")
        (folder / "SKILL.md").write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
        manifest_skills.append({"name": skill, "path": f"skills/{skill}/SKILL.md", "documents": len(members),
                                "description": description})
    (root / "entity_index.json").write_text("{}\n")
    manifest = {"corpus": corpus, "c2s_version": "0.1.0", "skills": manifest_skills, "doc_paths": doc_paths,
                "stats": {}}
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1))
    (root / MARKER_FILE).write_text(json.dumps({"corpus": corpus, "manifest": "manifest.json"}) + "\n")
    write_document_store(root / "documents.sqlite", [StoredDocument(d, t, x, hashlib.sha256(x.encode()).hexdigest(),
                                                                    "synthetic") for d, (t, x) in docs.items()])
    return root


def _write_index(folder: Path, group: str, ids: list[str], cards: dict[str, DocCard], other: str | None,
                 other_first: str | None, skills: dict[str, dict[str, list[str]]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [render_frontmatter(group, f"{group} articles: {len(ids)} documents.", {"level": 1, "documents": len(ids)}),
             f"# {group.title()}\n", f"Topic area: {group}.\n", f"{SECTION_DOCUMENTS} ({len(ids)})\n"]
    lines += [doc_row(cards[d]) for d in ids]
    if other and other_first:
        other_group = next(g for g, members in skills[other].items() if other_first in members)
        home = f"skills/{other}/{other_group}/INDEX.md" if other_group else f"skills/{other}/SKILL.md"
        lines.append(f"\n{SECTION_SEE_ALSO}\n")
        lines.append(doc_stub(cards[other_first], home))
    (folder / "INDEX.md").write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
