"""The compile graph as a person sees it: the Dagster UI's global lineage, rendered by a real
dagster-webserver in headless Chromium, shows every stage under its own name, inside the box
of its phase, one under the other in the order of work. The screenshot is written to
``$C2S_LINEAGE_PNG`` when set (``docs/lineage.png`` is made that way), else under tmp_path.

Like the view tests, this needs Debian's ``chromium-headless-shell`` (or $C2S_CHROMIUM) and PyPI
``playwright``; without either it skips.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import pytest

from c2s_pipeline.recipe import RECIPE

from .test_view import CHROMIUM_ARGS, chromium
from .webserver import dagster_webserver

GROUPS = ["ingest", "level_1", "level_2", "level_3", "level_4", "level_5", "publish"]
# UI preferences the page reads from localStorage: no welcome dialog, the spine top to bottom,
# nodes showing their name and kind only.
PREFERENCES = {"communityNux": "1", "asset-graph-direction": "vertical", "asset-node-facets": ["kind-tag"]}


def _boxes(page, selector: str) -> list[dict]:
    return page.eval_on_selector_all(selector, """els => els.map(e => {
        const r = e.getBoundingClientRect();
        return {text: e.textContent.trim(), x: r.x, y: r.y, width: r.width, height: r.height};
    })""")


def _inside(inner: dict, outer: dict) -> bool:
    return (outer["x"] <= inner["x"] and outer["y"] <= inner["y"] and inner["x"] + inner["width"] <= outer["x"] + outer["width"]
            and inner["y"] + inner["height"] <= outer["y"] + outer["height"])


def test_global_lineage_reads_as_the_spine(tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
    executable = chromium()
    png = Path(os.environ.get("C2S_LINEAGE_PNG") or tmp_path / "lineage.png")
    home = tmp_path / "home"
    home.mkdir()
    expanded = ",".join(f"global@global:{group}" for group in GROUPS)
    with dagster_webserver(home) as base, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            # The UI's CSP forbids eval, which Playwright's in-page queries use.
            context = browser.new_context(viewport={"width": 1000, "height": 1700}, bypass_csp=True)
            context.add_init_script("".join(f"localStorage.setItem({json.dumps(k)}, {json.dumps(json.dumps(v))});"
                                            for k, v in PREFERENCES.items()))
            page = context.new_page()
            page.goto(f"{base}/asset-groups/?expanded={quote(expanded)}")
            names = '[class*="AssetNode_assetName"] [data-tooltip]'
            page.locator(names).nth(len(RECIPE) - 1).wait_for(timeout=90_000)
            page.wait_for_load_state("networkidle")
            assets = _boxes(page, names)
            groups = [g for g in _boxes(page, "svg foreignObject.group [data-tooltip]") if g["text"] in GROUPS]
            outlines = _boxes(page, "svg foreignObject.group")

            # Every stage once, under its own name; every phase one box.
            assert Counter(a["text"] for a in assets) == Counter(spec.name for spec in RECIPE)
            assert Counter(g["text"] for g in groups) == Counter(GROUPS)
            # The spine reads top to bottom in the recipe's order ...
            where = {a["text"]: a for a in assets}
            tops = [where[spec.name]["y"] for spec in RECIPE]
            assert tops == sorted(tops) and len(set(tops)) == len(tops)
            # ... and each stage sits inside the box of its phase (the lowest box holding its header:
            # neighbouring boxes' margins overlap).
            box = {g["text"]: max((o for o in outlines if _inside(g, o)), key=lambda o: o["y"]) for g in groups}
            assert all(_inside(where[spec.name], box[spec.group]) for spec in RECIPE)

            # The picture: the graph itself, cropped to its boxes.
            left = min(o["x"] for o in outlines) - 16
            top = min(o["y"] for o in outlines) - 2  # the toolbar ends just above the first box
            right = max(o["x"] + o["width"] for o in outlines) + 16
            bottom = max(o["y"] + o["height"] for o in outlines) + 16
            png.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(png), clip={"x": left, "y": top, "width": right - left, "height": bottom - top})
        finally:
            browser.close()
    assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
