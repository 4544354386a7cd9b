"""``c2s export``: compiled trees as Agent Skills folders a client loads with no server, checked with
the reference validator (skills-ref) and by following every link as a client's file tools would."""

from __future__ import annotations

import json
import posixpath
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest
import skills_ref

from c2s_agent.export import (CLAUDE_SKILLS_DIR, DESCRIPTION_BUDGET, EXPORT_FILE, MAX_LINES, NOTES_FILE, export_tree)
from c2s_core.docstore import DocumentStore

from .fakes.trees import documents, write_tree
from .test_cli import run

AGENTSKILLS = Path(sys.executable).parent / "agentskills"
LINK = re.compile(r"\[((?:[^\]\\]|\\.)*)\]\(([^)\s]+)\)")
DOC_ROW = re.compile(r"^- (?:@see )?`([^`]+)` \*\*(.*)$")




def client_view(skills_root: Path) -> list[dict]:
    """What an Agent Skills client loads: each folder holding a SKILL.md, its name, description and
    files (read with the reference parser, not with c2s code)."""
    out = []
    for folder in sorted(p for p in skills_root.iterdir() if (p / "SKILL.md").is_file()):
        props = skills_ref.read_properties(folder)
        out.append({"name": props.name, "description": props.description, "folder": folder,
                    "files": sorted(f.relative_to(folder).as_posix() for f in folder.rglob("*") if f.is_file())})
    return out


def broken_links(skills_root: Path) -> tuple[int, list[tuple[Path, str]]]:
    """Every relative markdown link in every exported file, resolved as a file tool would:
    (links, broken ones as (file, target))."""
    count, broken = 0, []
    root = skills_root.resolve()
    for md in sorted(skills_root.rglob("*.md")):
        for _, target in LINK.findall(md.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue  # web links and anchors are not files
            count += 1
            path = (md.parent / unquote(target.split("#")[0])).resolve()
            if not path.is_file() or root not in path.parents:
                broken.append((md, target))
    return count, broken


def check_export(tree: Path, dest: Path, fmt: str) -> list[dict]:
    """The checks every export must pass; returns the client's view of it."""
    skills_root = dest / CLAUDE_SKILLS_DIR if fmt == "claude-code" else dest
    view = client_view(skills_root)
    assert view
    for skill in view:
        assert skills_ref.validate(skill["folder"]) == [], skill["name"]
        assert len(skill["name"]) <= 64 and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", skill["name"])
        assert "claude" not in skill["name"] and "anthropic" not in skill["name"]
        assert 0 < len(skill["description"]) <= 1024
    assert sum(len(s["name"]) + len(s["description"]) for s in view) <= DESCRIPTION_BUDGET
    for md in skills_root.rglob("*.md"):
        if md.name == "SKILL.md" or md.name == "INDEX.md" or md.name.startswith("CONTINUED-"):
            assert len(md.read_text(encoding="utf-8").splitlines()) <= MAX_LINES, md

    mapping = json.loads((dest / EXPORT_FILE).read_text())
    links, broken = broken_links(skills_root)
    assert links
    in_nav = [f"{md.relative_to(skills_root)} → {t}" for md, t in broken if "docs" not in md.parent.name]
    assert not in_nav, in_nav[:5]
    # A document's own links stay as written only where they name no exported document.
    doc_of = {(dest / path).resolve(): doc_id for doc_id, path in mapping["documents"].items()}
    for md, target in broken:
        doc_id = doc_of[md.resolve()]
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(doc_id), unquote(target.split("#")[0])))
        assert resolved not in mapping["documents"], (doc_id, target)

    # Every document row links to the document's full text, as stored in the tree.
    store = DocumentStore(tree / "documents.sqlite")
    for md in skills_root.rglob("*.md"):
        if "/docs/" in md.as_posix():
            continue
        for line in md.read_text(encoding="utf-8").splitlines():
            if m := DOC_ROW.match(line):
                targets = [t for _, t in LINK.findall(line) if "/docs/" in f"/{unquote(t)}"]
                assert targets, line
                text = (md.parent / unquote(targets[0])).read_text(encoding="utf-8")
                assert f"doc_id: `{m[1]}`" in text and _prose(store.get(m[1]).text)[:200] in _prose(text)

    assert mapping["format"] == fmt
    for doc_id, path in mapping["documents"].items():
        assert _prose(store.get(doc_id).text)[-100:] in _prose((dest / path).read_text(encoding="utf-8"))
    return view


@pytest.mark.parametrize("fixture", ["sample_tree", "wixqa_tree"])
def test_export_passes_the_agentskills_validator(fixture, request, tmp_path):
    tree = request.getfixturevalue(fixture).out
    dest = tmp_path / "project"
    result = run("export", "claude-code", str(tree), "--to", str(dest))
    assert result.exit_code == 0, result.output
    skills = sorted(p for p in (dest / CLAUDE_SKILLS_DIR).iterdir() if p.is_dir())
    manifest = json.loads((tree / "manifest.json").read_text())
    assert [p.name for p in skills] == sorted(s["name"] for s in manifest["skills"])
    for folder in skills:  # the reference validator's own command line, as a user would run it
        proc = subprocess.run([str(AGENTSKILLS), "validate", str(folder)], capture_output=True, text=True)
        assert proc.returncode == 0 and "Valid skill" in proc.stdout, proc.stderr
    check_export(tree, dest, "claude-code")
    store = DocumentStore(tree / "documents.sqlite")
    assert set(json.loads((dest / EXPORT_FILE).read_text())["documents"]) == set(store.ids())


def test_client_view_of_an_agent_skills_export(sample_tree, tmp_path):
    dest = tmp_path / "skills"
    result = run("export", "agent-skills", str(sample_tree.out), "--to", str(dest))
    assert result.exit_code == 0, result.output
    view = check_export(sample_tree.out, dest, "agent-skills")
    manifest = sample_tree.manifest
    assert [s["name"] for s in view] == sorted(s["name"] for s in manifest["skills"])
    for skill in view:
        source = next(s for s in manifest["skills"] if s["name"] == skill["name"])
        assert skill["description"] == source["description"]
        assert "SKILL.md" in skill["files"] and any(f.endswith("/INDEX.md") for f in skill["files"])
        assert sum(f.startswith("docs/") for f in skill["files"]) == source["documents"]
    print("\nwhat a client loads:")
    for skill in view:
        print(f"  {skill['name']}: {skill['description'][:70]}… ({len(skill['files'])} files)")
    prompt = skills_ref.to_prompt([s["folder"] for s in view])  # the <available_skills> block a client builds
    assert prompt.count("<skill>") == len(view) and all(s["name"] in prompt for s in view)
    # The --format option gives the same layout as the agent-skills command; an export is deterministic.
    again = tmp_path / "again"
    assert run("export", "claude-code", str(sample_tree.out), "--to", str(again), "--format",
               "agent-skills").exit_code == 0
    assert _contents(dest) == _contents(again)
    assert not (dest / NOTES_FILE).exists()  # nothing was cut


def test_descriptions_over_the_budget_are_cut_deterministically(tmp_path):
    docs = documents(60)
    ids = list(docs)
    skills = {f"topic-{i:02d}": {"": ids[2 * i:2 * i + 2]} for i in range(30)}
    long = {name: f"{name} " + " ".join(f"word{i}{j}" for j in range(150)) for i, name in enumerate(skills)}
    assert sum(len(n) + len(d[:1024]) for n, d in long.items()) > DESCRIPTION_BUDGET
    tree = write_tree(tmp_path / "tree", skills, docs, descriptions=long)
    result = run("export", "agent-skills", str(tree), "--to", str(tmp_path / "a"))
    assert result.exit_code == 0, result.output
    view = check_export(tree, tmp_path / "a", "agent-skills")
    assert len(view) == 30
    total = sum(len(s["name"]) + len(s["description"]) for s in view)
    assert DESCRIPTION_BUDGET - 30 * 12 < total <= DESCRIPTION_BUDGET  # cut to fit, not far below
    assert all(s["description"].endswith("…") for s in view)
    assert result.output.count("note:") == 30 and "description cut from" in result.output
    notes = (tmp_path / "a" / NOTES_FILE).read_text()
    assert notes.count("description cut from") == 30
    assert json.loads((tmp_path / "a" / EXPORT_FILE).read_text())["notes"] == [
        line[2:] for line in notes.splitlines() if line.startswith("- ")]
    export_tree(tree, tmp_path / "b", "agent-skills")
    assert _contents(tmp_path / "a") == _contents(tmp_path / "b")


def test_a_budget_too_small_for_every_skill_leaves_out_the_smallest(tmp_path):
    docs = documents(60)
    ids = list(docs)
    skills, start = {}, 0
    for i in range(20):  # 1, 2 or 3 documents each
        n = i % 3 + 1
        skills[f"topic-{i:02d}"] = {"": ids[start:start + n]}
        start += n
    tree = write_tree(tmp_path / "tree", skills, docs)
    result = export_tree(tree, tmp_path / "out", "agent-skills", description_budget=700)
    view = check_export(tree, tmp_path / "out", "agent-skills")
    assert sum(len(s["name"]) + len(s["description"]) for s in view) <= 700
    left_out = sorted(skills, key=lambda s: (len(skills[s][""]), s))[:20 - len(view)]
    assert {s["name"] for s in view} == set(skills) - set(left_out)
    assert sum("left out" in n for n in result.notes) == len(left_out) > 0
    assert broken_links(tmp_path / "out")[1] == []  # synthetic documents have no links of their own
    related = "".join((tmp_path / "out" / s["name"] / "SKILL.md").read_text() for s in view)
    assert "(not in this export)" in related  # related skills that were left out lose their link


def test_a_long_skill_md_is_split_into_continuation_files(tmp_path):
    docs = documents(700, size=80)
    tree = write_tree(tmp_path / "tree", {"everything": {"": list(docs)}}, docs)
    result = run("export", "claude-code", str(tree), "--to", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    check_export(tree, tmp_path / "out", "claude-code")
    folder = tmp_path / "out" / CLAUDE_SKILLS_DIR / "everything"
    pieces = [folder / "SKILL.md"] + sorted(folder.glob("CONTINUED-*.md"), key=lambda p: int(p.stem.split("-")[1]))
    assert len(pieces) == 2 and "split into 2 files" in result.output
    texts = [p.read_text() for p in pieces]
    assert "_Continued in [CONTINUED-2.md](CONTINUED-2.md)._" in texts[0]
    assert texts[1].startswith("# Everything (continued, part 2)\n\n## Documents (700) (continued)")
    rows = [m[1] for t in texts for line in t.splitlines() if (m := DOC_ROW.match(line))]
    assert set(docs) <= set(rows) and len(rows) == 700 + 3  # every row once, plus the 3 examples


def test_names_are_made_valid_and_unique(tmp_path):
    docs = documents(6)
    ids = list(docs)
    skills = {"tools": {"": ids[:2]}, "claude-tools": {"": ids[2:4]}, "anthropic-notes": {"": ids[4:]}}
    tree = write_tree(tmp_path / "tree", skills, docs)
    result = export_tree(tree, tmp_path / "out", "agent-skills")
    view = check_export(tree, tmp_path / "out", "agent-skills")
    assert sorted(s["name"] for s in view) == ["notes", "tools", "tools-2"]
    assert any("'claude-tools' exported as 'tools-2'" in n for n in result.notes)


def test_bad_input_is_a_one_line_error(sample_tree, tmp_path):
    tree = str(sample_tree.out)
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("mine")
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "not-a-tree").mkdir()
    for args, message in (
        ([str(tmp_path / "missing"), "--to", str(tmp_path / "x")], "tree not found"),
        ([str(tmp_path / "not-a-tree"), "--to", str(tmp_path / "x")], "not a c2s tree"),
        ([tree, "--to", str(tmp_path / "foreign")], "is not empty and is not a c2s export"),
        ([tree, "--to", str(tmp_path / "a-file")], "is not a directory"),
        ([tree, "--to", str(sample_tree.out / "inside")], "inside the tree"),
        ([tree, "--to", str(sample_tree.out.parent)], "holds the tree"),
        ([tree, "--to", str(tmp_path / "x"), "--format", "zip"], "unknown format 'zip'"),
    ):
        result = run("export", "claude-code", *args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output and len(result.output.strip().splitlines()) == 1, result.output
        assert "Traceback" not in result.output
    assert (tmp_path / "foreign" / "notes.txt").read_text() == "mine" and not (tmp_path / "x").exists()
    # An earlier export is replaced whole; an empty folder is fine.
    (tmp_path / "empty").mkdir()
    assert run("export", "claude-code", tree, "--to", str(tmp_path / "empty")).exit_code == 0
    (tmp_path / "empty" / CLAUDE_SKILLS_DIR / "stale-skill").mkdir()
    assert run("export", "claude-code", tree, "--to", str(tmp_path / "empty")).exit_code == 0
    assert not (tmp_path / "empty" / CLAUDE_SKILLS_DIR / "stale-skill").exists()
    assert not list(tmp_path.glob(".*export*"))  # no staging folder left behind


def _prose(text: str) -> str:
    """``text`` with link targets blanked: the export points links between documents at their files."""
    return re.sub(r"\]\([^)]*\)", "]()", text)


def _contents(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_links_between_documents_point_at_the_exported_files(sample_tree, tmp_path):
    export_tree(sample_tree.out, tmp_path / "out", "agent-skills")
    mapping = json.loads((tmp_path / "out" / EXPORT_FILE).read_text())
    files = {(tmp_path / "out" / p).resolve() for p in mapping["documents"].values()}
    store = DocumentStore(sample_tree.out / "documents.sqlite")
    linking = [d for d in store.ids() if "](../" in store.get(d).text]
    assert linking
    for doc_id in linking:
        path = tmp_path / "out" / mapping["documents"][doc_id]
        text = path.read_text()
        body = text.split("\n\n", 1)[1]  # after the doc_id line
        targets = {(path.parent / unquote(t.split("#")[0])).resolve() for _, t in LINK.findall(body)
                   if not t.startswith(("http", "#"))}
        assert targets and targets <= files, doc_id  # each one another document's exported file
