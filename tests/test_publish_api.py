"""``c2s publish skills-api``: the real Anthropic SDK uploading a tree's skills to a local fake of the
Skills API (tests/fakes/skills_api.py) that checks the API's limits and protocol."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from c2s_agent.skills_api import MAX_IN_FLIGHT, default_state_path, publish

from .fakes.skills_api import FakeSkillsAPI
from .fakes.trees import documents, write_tree
from .test_cli import run
from .test_export import broken_links

BIG = documents(450, "big")  # one skill of 450 documents: over 200 files, so split into parts
SMALL = documents(33, "small")




def skills_of(drop: tuple[str, ...] = ()) -> dict[str, dict[str, list[str]]]:
    big = list(BIG)
    skills = {"big-skill": {"big-a": big[:220], "big-b": big[220:]}}
    small = list(SMALL)
    for i in range(11):
        skills[f"skill-{i:02d}"] = {"": small[3 * i:3 * i + 3]}
    return {k: v for k, v in skills.items() if k not in drop}


def make_tree(root: Path, *, drop: tuple[str, ...] = (), changed: dict[str, str] | None = None) -> Path:
    if root.exists():
        shutil.rmtree(root)
    docs = {**BIG, **SMALL}
    for doc_id, text in (changed or {}).items():
        docs[doc_id] = (docs[doc_id][0], text)
    return write_tree(root, skills_of(drop), docs)


FOLDERS = sorted(["big-skill", "big-skill-part-2", "big-skill-part-3"] + [f"skill-{i:02d}" for i in range(11)])


@pytest.fixture
def api():
    with FakeSkillsAPI(upload_latency=0.1, page_size=5) as server:  # small pages: the SDK pages on
        yield server


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    return make_tree(tmp_path / "tree")


def publish_cli(tree: Path, api: FakeSkillsAPI, *extra: str):
    return run("publish", "skills-api", str(tree), "--base-url", api.url, *extra)


def test_first_publish_creates_every_skill_within_the_limits(api, tree, tmp_path):
    foreign = api.add_skill("my own skill", "mine")
    api.add_skill("Excel", "xlsx", source="anthropic")
    result = publish_cli(tree, api)
    assert result.exit_code == 0, result.output
    uploads = api.uploads
    assert len(uploads) == len(FOLDERS) and api.violations == []
    for upload in uploads:  # one skill per request, inside the API's limits
        assert len(upload.top_dirs) == 1 and len(upload.files) <= 200 and upload.content_bytes <= 30_000_000
        assert upload.path == "/v1/skills"
    assert 2 <= api.max_uploads_in_flight <= MAX_IN_FLIGHT
    assert max(len(u.files) for u in uploads) == 200  # the big skill filled its parts
    published = {s.name: s for s in api.skills.values() if s.display_name.startswith("c2s/")}
    assert sorted(published) == FOLDERS
    assert all(s.display_name == f"c2s/synthetic/{name}" for name, s in published.items())
    assert "split into 3 skills: big-skill, big-skill-part-2, big-skill-part-3" in result.output
    assert f"published: {len(FOLDERS)} create" in result.output
    assert api.skills[foreign.id].versions  # someone else's skill untouched
    # What the API holds, laid out as it mounts skills (side by side): every link resolves.
    mounted = tmp_path / "mounted"
    for name, skill in published.items():
        for rel, data in skill.latest.files.items():
            (mounted / name / rel).parent.mkdir(parents=True, exist_ok=True)
            (mounted / name / rel).write_bytes(data)
    links, broken = broken_links(mounted)
    assert links > 450 and broken == []
    parts = sum(len(published[f].latest.files) for f in FOLDERS if f.startswith("big-skill"))
    assert parts == 1 + 2 + 450 + 2  # SKILL.md, 2 INDEX.md, 450 documents, a SKILL.md in each of 2 more parts
    state = json.loads(default_state_path(tree).read_text())
    assert sorted(state["endpoints"][api.url]["synthetic"]) == FOLDERS


def test_an_unchanged_tree_uploads_nothing_and_a_change_makes_one_new_version(api, tree, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)  # the endpoint from the environment
    assert run("publish", "skills-api", str(tree)).exit_code == 0
    api.reset_log()
    result = run("publish", "skills-api", str(tree))
    assert result.exit_code == 0, result.output
    assert api.uploads == [] and f"published: {len(FOLDERS)} unchanged" in result.output
    assert {r.method for r in api.requests} == {"GET"}  # listing only

    # One document of skill-04 and one in the big skill's last part; their rows (first sentence) stay.
    small_doc, big_doc = list(SMALL)[3 * 4], list(BIG)[-1]
    make_tree(tree, changed={small_doc: SMALL[small_doc][1] + " A rewritten article about settings.",
                             big_doc: BIG[big_doc][1] + " Rewritten too."})
    api.reset_log()
    result = run("publish", "skills-api", str(tree))
    assert result.exit_code == 0, result.output
    changed = {r.top_dirs.pop() for r in api.uploads}
    assert changed == {"skill-04", "big-skill-part-3"}
    assert all(r.path.endswith("/versions") for r in api.uploads)
    assert "2 new version, 12 unchanged" in result.output and "content changed" in result.output
    by_name = api.by_name()
    assert len(by_name["skill-04"].versions) == 2 and len(by_name["skill-05"].versions) == 1
    assert b"A rewritten article" in b"".join(by_name["skill-04"].latest.files.values())


def test_a_version_made_elsewhere_is_replaced(api, tree):
    assert publish_cli(tree, api).exit_code == 0
    skill = api.by_name()["skill-02"]
    skill.versions.append(type(skill.latest)("skillver_other", "skill-02", "", {"SKILL.md": b"x"}, "later"))
    api.reset_log()
    result = publish_cli(tree, api)
    assert result.exit_code == 0 and [r.top_dirs for r in api.uploads] == [{"skill-02"}]
    assert "is not the one c2s uploaded" in result.output


def test_stale_skills_are_deleted_only_with_prune(api, tree):
    foreign = api.add_skill("my own skill", "mine")
    assert publish_cli(tree, api).exit_code == 0
    gone = api.by_name()["skill-07"]
    make_tree(tree, drop=("skill-07",))
    api.reset_log()
    result = publish_cli(tree, api)
    assert result.exit_code == 0, result.output
    assert "stale" in result.output and "--prune deletes it" in result.output
    assert not [r for r in api.requests if r.method == "DELETE"] and gone.id in api.skills

    version = gone.latest.id
    api.reset_log()
    result = publish_cli(tree, api, "--prune")
    assert result.exit_code == 0, result.output
    deletes = [r.path for r in api.requests if r.method == "DELETE"]
    assert deletes == [f"/v1/skills/{gone.id}/versions/{version}", f"/v1/skills/{gone.id}"]  # versions first
    assert gone.id not in api.skills and foreign.id in api.skills and "1 delete" in result.output
    state = json.loads(default_state_path(tree).read_text())["endpoints"][api.url]["synthetic"]
    assert "skill-07" not in state and api.uploads == []


def test_dry_run_prints_the_plan_and_makes_no_request(api, tree, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY")  # a dry run needs no key
    result = publish_cli(tree, api, "--dry-run")
    assert result.exit_code == 0, result.output
    assert api.requests == [] and "the API was not asked" in result.output
    assert result.output.count("  create ") == len(FOLDERS) and f"would: {len(FOLDERS)} create" in result.output

    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    assert publish_cli(tree, api).exit_code == 0
    make_tree(tree, drop=("skill-09",), changed={list(SMALL)[0]: SMALL[list(SMALL)[0]][1] + " Changed."})
    api.reset_log()
    result = publish_cli(tree, api, "--dry-run", "--prune")
    assert result.exit_code == 0, result.output
    assert api.requests == []
    # skill-08 changed too: its related skill was skill-09.
    assert "2 new version, 11 unchanged, 1 delete" in result.output
    assert "  new version skill-00" in result.output and "  new version skill-08" in result.output
    assert "  delete      skill-09" in result.output


def test_byte_limit_splits_documents_and_skills(tmp_path, monkeypatch):
    docs = documents(12, "large", size=60_000) | {"huge/0000.md": ("Huge", "A long line of text.\n" * 25_000)}
    root = write_tree(tmp_path / "tree", {"large": {"": list(docs)}}, docs)
    with FakeSkillsAPI(max_bytes=300_000) as api:
        report = publish(root, base_url=api.url, api_key="k", max_bytes=300_000)
        assert api.violations == [] and all(u.content_bytes <= 300_000 for u in api.uploads)
        assert len(api.uploads) >= 4 and len(report.done) == len(api.uploads)
        assert any("'huge/0000.md'" in n and "split into" in n for n in report.notes)
        mounted = tmp_path / "mounted"
        for skill in api.by_name().values():
            for rel, data in skill.latest.files.items():
                (mounted / skill.name / rel).parent.mkdir(parents=True, exist_ok=True)
                (mounted / skill.name / rel).write_bytes(data)
        assert broken_links(mounted)[1] == []
        text = "".join(p.read_text() for p in sorted(mounted.rglob("huge-0000*.md")))
        assert text.count("A long line of text.") == 25_000


def test_api_errors_are_one_line(api, tree, monkeypatch):
    def error_line(result) -> str:
        errors = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert result.exit_code == 1 and len(errors) == 1 and "Traceback" not in result.output, result.output
        return errors[0]

    api.fail(401, "authentication_error", "invalid x-api-key")
    result = publish_cli(tree, api)
    assert error_line(result) == "error: skills API refused to list skills: 401 authentication_error: invalid x-api-key"
    assert len(result.output.strip().splitlines()) == 1 and api.uploads == []

    api.fail(500, "api_error", "Internal server error", when=lambda r: "skill-03" in r.top_dirs)
    line = error_line(publish_cli(tree, api))
    assert line.startswith("error: skills API refused to create skill-03: 500 api_error: Internal server error")
    assert "rerun to finish" in line
    created = set(api.by_name())  # uploads already in flight finished; later ones were not started
    assert "skill-03" not in created and len(created) >= MAX_IN_FLIGHT - 1
    api.reset_log()
    assert publish_cli(tree, api).exit_code == 0  # the rerun uploads only what is missing
    assert sorted(u.top_dirs.pop() for u in api.uploads) == sorted(set(FOLDERS) - created)
    assert all(u.path == "/v1/skills" for u in api.uploads)

    closed = FakeSkillsAPI().start()
    url = closed.url
    closed.stop()
    line = error_line(run("publish", "skills-api", str(tree), "--base-url", url))
    assert line.startswith(f"error: cannot reach the skills API at {url} to list skills")

    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert "ANTHROPIC_API_KEY is not set" in error_line(publish_cli(tree, api))
    assert "not a c2s tree" in error_line(run("publish", "skills-api", str(tree.parent), "--dry-run"))
