"""``c2s view``: the static HTML page of a compiled tree, checked in a real headless Chromium.

The browser checks need Debian's ``chromium-headless-shell`` (or $C2S_CHROMIUM) and PyPI
``playwright`` (its own browser downloads are never used); without either they skip.
"""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest
from typer.testing import CliRunner

from c2s_core.navrows import parse_nav_file
from c2s_core.view import INDEX_HTML, VIEW_MARKER, build_view, embed_json
from c2s_cli.main import app

INJECTION = "</script><img src=x onerror=alert(1)>"
CHROMIUM_PATHS = ("/usr/lib/chromium/chromium-headless-shell", "/usr/bin/chromium-headless-shell",
                  "/usr/lib/chromium/headless_shell", "/usr/bin/chromium", "/usr/lib/chromium/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def run(*args: str):
    result = CliRunner().invoke(app, ["view", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def chromium() -> str:
    if found := os.environ.get("C2S_CHROMIUM"):
        if not os.access(found, os.X_OK):
            pytest.skip(f"C2S_CHROMIUM={found} is not an executable")
        return found
    for path in CHROMIUM_PATHS:
        if os.access(path, os.X_OK):
            return path
    pytest.skip("no headless Chromium found (apt-get install chromium-headless-shell, or set C2S_CHROMIUM)")


# -- the tree the browser sees: the sample tree with hostile text in a title and a heading ----------

@pytest.fixture(scope="module")
def tainted(sample_tree, tmp_path_factory):
    root = tmp_path_factory.mktemp("view") / "tree"
    shutil.copytree(sample_tree.out, root)
    leaf = sorted((root / "skills").rglob("INDEX.md"))[0]
    text = leaf.read_text(encoding="utf-8")
    doc_id = parse_nav_file(text, "").cards[0].doc_id
    text = re.sub(rf"^(- `{re.escape(doc_id)}` \*\*).*?(\*\*)", lambda m: m[1] + INJECTION + m[2], text, count=1, flags=re.M)
    text = re.sub(r"^# .*$", lambda m: "# <b>group</b> " + INJECTION, text, count=1, flags=re.M)
    leaf.write_text(text, encoding="utf-8")
    return root, doc_id, leaf.relative_to(root).as_posix()


@pytest.fixture(scope="session")  # session: set up before the (session) tree is compiled
def browser():
    """Playwright and a Chromium binary, or a skip; resolved before the tree is compiled."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
    return sync_api, chromium()


@pytest.fixture(scope="module")
def browser_page(browser, tainted):
    sync_api, executable = browser
    index = build_view(tainted[0], tainted[0].parent / "site")
    seen = {"requests": [], "dialogs": [], "errors": []}
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("request", lambda r: seen["requests"].append(r.url))
        page.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))
        page.on("pageerror", lambda e: seen["errors"].append(str(e)))
        page.goto(index.as_uri())
        page.wait_for_selector("body[data-ready='1']", timeout=10_000)
        yield page, seen, index
        browser.close()


def search(page, text: str) -> None:
    page.fill("#q", text)
    page.press("#q", "Enter")


def test_every_node_is_in_the_page_with_its_document_count(browser_page, tainted):
    page, seen, index = browser_page
    root = tainted[0]
    manifest = json.loads((root / "manifest.json").read_text())
    groups = list((root / "skills").rglob("INDEX.md"))
    assert page.locator("#outline [data-node]").count() == len(manifest["skills"]) + len(groups) + len(manifest["doc_paths"])
    assert page.locator("#outline details.skill").count() == len(manifest["skills"])
    assert page.locator("#outline details.group").count() == len(groups)
    assert page.locator("#outline li.doc").count() == len(manifest["doc_paths"])
    counts = page.locator("#outline details.skill > summary .count").all_inner_texts()
    assert sorted(map(int, counts)) == sorted(s["documents"] for s in manifest["skills"])
    assert page.locator("#map > .cell").count() == len(manifest["skills"])  # the treemap starts at the skills
    # Opened from disk with nothing fetched but the page itself, and no script errors.
    assert seen["requests"] == [index.as_uri()] and not seen["errors"]


def test_search_finds_a_document_by_title(browser_page, sample_tree):
    page, seen, _ = browser_page
    doc_id, nav_path = sorted(sample_tree.manifest["doc_paths"].items())[-1]
    nav = parse_nav_file((sample_tree.out / nav_path).read_text(), nav_path)
    title = next(c.title for c in nav.cards if c.doc_id == doc_id)
    search(page, title.lower())
    row = page.locator("#outline li.doc.match", has_text=title)
    assert row.first.is_visible() and title.lower() in row.first.locator("mark").inner_text().lower()
    assert page.locator("#outline li.doc:not(.hidden)").count() == page.locator("#outline li.doc.match").count()
    assert page.locator("#hits").inner_text().endswith(f"of {len(sample_tree.manifest['doc_paths'])} documents")
    assert page.locator("#details h2").inner_text() == title  # Enter opened the first match
    assert page.locator("#map .cell.match").count() >= 1
    search(page, "")
    assert page.locator("#outline li.doc.hidden").count() == 0


def test_hostile_titles_render_as_text(browser_page, tainted):
    page, seen, index = browser_page
    _, doc_id, group_path = tainted
    html = index.read_text(encoding="utf-8")
    assert INJECTION not in html and "<b>group</b>" not in html  # the JSON escapes every '<'
    search(page, "onerror")
    row = page.locator("#outline li.doc.match")
    assert row.count() == 1 and row.inner_text() == INJECTION and row.get_attribute("title") == doc_id
    assert page.locator("#details h2").inner_text() == INJECTION
    page.locator("#details .link").click()  # "Filed under": the group whose heading is hostile too
    assert page.locator("#details h2").inner_text() == "<b>group</b> " + INJECTION
    assert page.locator("#details code").inner_text() == group_path
    assert page.evaluate("document.querySelectorAll('img, b, #outline script, #details script').length") == 0
    assert not seen["dialogs"] and not seen["errors"]
    search(page, "")


def test_screenshot(browser_page, tmp_path_factory):
    page, seen, _ = browser_page
    page.fill("#q", "payment")
    page.wait_for_selector("#hits:not(:empty)")
    page.locator("#map > .cell > .label").first.click()  # the largest skill: its groups, matches marked
    shot = tmp_path_factory.getbasetemp() / "view-screenshot.png"
    page.screenshot(path=str(shot), full_page=False)
    print(f"screenshot: {shot}")
    assert shot.stat().st_size > 20_000
    assert not seen["errors"]


# -- the command, no browser needed ------------------------------------------------------------------

def test_view_is_deterministic_and_replaces_only_a_view(sample_tree, tmp_path):
    result = run(str(sample_tree.out), "--out", str(tmp_path / "a"))
    assert result.exit_code == 0, result.output
    index = tmp_path / "a" / INDEX_HTML
    assert result.output.strip() == str(index) and (tmp_path / "a" / VIEW_MARKER).is_file()
    build_view(sample_tree.out, tmp_path / "b")
    assert index.read_bytes() == (tmp_path / "b" / INDEX_HTML).read_bytes()
    assert str(sample_tree.out) not in index.read_text()  # nothing where-it-lives in the page
    assert run(str(sample_tree.out), "--out", str(tmp_path / "a")).exit_code == 0  # a previous view is replaced
    assert index.read_bytes() == (tmp_path / "b" / INDEX_HTML).read_bytes()


def test_bad_input_is_refused_in_one_line(sample_tree, tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    (tmp_path / "file").write_text("x")
    (tmp_path / "empty").mkdir()
    cases = [
        ((str(tmp_path / "empty"), "--out", str(tmp_path / "s1")), "not a c2s tree"),
        ((str(tmp_path / "missing"), "--out", str(tmp_path / "s2")), "tree not found"),
        ((str(sample_tree.out), "--out", str(tmp_path / "busy")), "not a previous c2s view"),
        ((str(sample_tree.out), "--out", str(tmp_path / "file")), "is a file"),
        ((str(sample_tree.out), "--out", str(sample_tree.out / "site")), "inside the tree"),
    ]
    for args, message in cases:
        result = run(*args)
        assert result.exit_code == 2 and message in result.output, (args, result.output)
        assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine" and not (sample_tree.out / "site").exists()
    assert not (tmp_path / "s1").exists()


def test_embedded_json_cannot_close_its_script():
    text = embed_json({"t": INJECTION + "<!-- & \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"t": INJECTION + "<!-- & \u2028"}
