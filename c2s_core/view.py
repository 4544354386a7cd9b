"""``c2s view``: a compiled tree as one static HTML page (outline, treemap, details, title search).

The page opens from disk (file://) with no server and no network: CSS, JS and the tree's data are
inline, and a Content-Security-Policy allows only those two inline blocks. Everything shown comes
from documents, so the data travels as JSON inside a non-executed script element and the page
builds its DOM with ``textContent`` only. Same tree, same bytes: nothing time- or path-dependent
is written.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
from pathlib import Path

from .layout import ENTITY_INDEX_FILE

from .navrows import parse_nav_file
from .tree import Tree, TreeError

INDEX_HTML = "index.html"
VIEW_MARKER = ".c2s-view"  # marks a folder as a view, so a later run may replace it
MAX_ENTITIES = 20  # per node; the most-mentioned first


class ViewError(ValueError):
    """The view cannot be written where asked; the message says why."""


def build_view(tree: str | os.PathLike[str], out: str | os.PathLike[str]) -> Path:
    """Write the view of ``tree`` into ``out``; returns the path of its index.html.

    Raises :class:`TreeError` when ``tree`` is not a compiled tree and :class:`ViewError` when
    ``out`` is a file, lies inside the tree, or is a non-empty folder that is not a view."""
    t = Tree(tree)
    t.skills  # noqa: B018 - raises TreeError for a tree without skills
    site = Path(out).expanduser().resolve()
    _check_out(site, t.root)
    page = render_page(tree_data(t))
    site.mkdir(parents=True, exist_ok=True)
    _write(site / VIEW_MARKER, json.dumps({"c2s_view": 1, "corpus": str(t.manifest.get("corpus", ""))}) + "\n")
    _write(site / INDEX_HTML, page)
    return site / INDEX_HTML


def _check_out(site: Path, root: Path) -> None:
    if site.exists() and not site.is_dir():
        raise ViewError(f"--out {site} is a file; choose a folder for the view")
    if site == root or root in site.parents:
        raise ViewError(f"--out {site} is inside the tree {root}; choose a folder outside it")
    if site.is_dir() and any(site.iterdir()) and not (site / VIEW_MARKER).is_file():
        raise ViewError(f"refusing to write into {site}: it is not empty and is not a previous c2s view "
                        f"(no {VIEW_MARKER}); choose an empty or new folder")


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")  # a reader never sees a half-written page
    tmp.write_text(text, encoding="utf-8", newline="\n")
    os.replace(tmp, path)


# -- the tree as data ------------------------------------------------------------------------------

def tree_data(tree: Tree) -> dict:
    """Nodes in pre-order (``nodes[0]`` is the root): skills, groups and documents with their sizes
    (document counts), summaries and entities; children by index."""
    entities = _entities_by_path(tree.root)
    manifest = tree.manifest
    corpus = str(manifest.get("corpus") or tree.root.name)
    nodes: list[dict] = [{"kind": "root", "name": corpus, "title": corpus, "parent": -1, "children": [], "size": 0}]
    seen: set[str] = set()

    def add_nav(path: str, parent: int, kind: str) -> None:
        if path in seen:  # a link loop in a hand-edited tree must not recurse forever
            return
        seen.add(path)
        try:
            text = (tree.root / path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return  # a dangling link is skipped, as the navigator skips it
        nav = parse_nav_file(text, path)
        index = len(nodes)
        named = {name: n for name, n in entities.get(path, [])}
        for name in nav.entities:
            named.setdefault(name, 0)
        node = {
            "kind": kind, "name": nav.name, "title": nav.title or nav.name, "path": path, "parent": parent,
            "children": [], "size": 0, "description": nav.description, "summary": nav.summary,
            "entities": sorted(named.items(), key=lambda e: (-e[1], e[0]))[:MAX_ENTITIES],
            "see": [{"doc": c.doc_id, "title": c.title, "home": c.home} for c in nav.see_cards]
                   + [{"group": g.path, "title": g.description or g.name} for g in nav.see_groups],
            "related": [{"path": g.path, "name": g.name, "note": g.description} for g in nav.related],
        }
        nodes.append(node)
        nodes[parent]["children"].append(index)
        for group in nav.groups:
            add_nav(group.path, index, "group")
        for card in nav.cards:
            nodes[index]["children"].append(len(nodes))
            nodes.append({"kind": "doc", "name": card.doc_id, "title": card.title, "path": card.doc_id,
                          "parent": index, "children": [], "size": 1, "one_line": card.one_line,
                          "phrases": list(card.phrases), "identifiers": list(card.identifiers), "home": path})

    for skill in tree.skills:
        add_nav(skill.path, 0, "skill")
    for node in reversed(nodes):  # pre-order reversed: every child is sized before its parent
        if node["kind"] != "doc":
            node["size"] = sum(nodes[c]["size"] for c in node["children"])
    counts = {k: sum(1 for n in nodes if n["kind"] == k) for k in ("skill", "group", "doc")}
    return {"corpus": corpus, "c2s_version": str(manifest.get("c2s_version", "")), "counts": counts,
            "nodes": nodes}


def _entities_by_path(root: Path) -> dict[str, list[tuple[str, int]]]:
    """entity_index.json (entity → [{path, mentions}]) turned around: nav file → [(entity, mentions)]."""
    try:
        index = json.loads((root / ENTITY_INDEX_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # entities are an extra; a tree without them is still worth viewing
    by_path: dict[str, list[tuple[str, int]]] = {}
    for entity, rows in index.items() if isinstance(index, dict) else ():
        for row in rows if isinstance(rows, list) else ():
            if isinstance(row, dict) and isinstance(row.get("path"), str):
                mentions = row.get("mentions")
                by_path.setdefault(row["path"], []).append((str(entity), mentions if isinstance(mentions, int) else 0))
    return by_path


# -- the page --------------------------------------------------------------------------------------

def embed_json(data: object) -> str:
    """JSON safe inside a <script> element: no '<', '>' or '&' can close it or start markup."""
    text = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def render_page(data: dict) -> str:
    counts = data["counts"]
    stats = (f"{counts['skill']} skills · {counts['group']} groups · {counts['doc']} documents"
             + (f" · c2s {data['c2s_version']}" if data["c2s_version"] else ""))
    csp = (f"default-src 'none'; script-src {_sha256(_JS)}; style-src {_sha256(_CSS)}; "
           "img-src 'none'; base-uri 'none'; form-action 'none'")
    return _PAGE.format(csp=html.escape(csp), title=html.escape(data["corpus"]), stats=html.escape(stats),
                        css=_CSS, js=_JS, data=embed_json(data))


_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<title>{title} · c2s skill tree</title>
<style>{css}</style>
</head>
<body>
<header>
  <div class="brand"><h1>{title}</h1><span class="stats">{stats}</span></div>
  <div class="search">
    <input id="q" type="search" placeholder="Search document titles…" autocomplete="off" spellcheck="false" aria-label="Search document titles">
    <span id="hits" aria-live="polite"></span>
  </div>
</header>
<main>
  <nav id="outline" aria-label="Skills, groups and documents"></nav>
  <section id="right">
    <div id="crumbs" aria-label="Treemap focus"></div>
    <div id="map" aria-label="Treemap: area is document count; click to zoom"></div>
    <article id="details"></article>
  </section>
</main>
<noscript><p class="noscript">This view needs JavaScript to draw the tree.</p></noscript>
<script type="application/json" id="c2s-data">{data}</script>
<script>{js}</script>
</body>
</html>
"""

_CSS = """
:root { --ink: #1f2933; --muted: #616e7c; --line: #e4e7eb; --bg: #f5f7fa; --panel: #fff;
  --accent: #2f6fdf; --mark: #ffe27a; --sel: #e3edff;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; color: var(--ink); }
* { box-sizing: border-box; }
html, body { margin: 0; height: 100%; background: var(--bg); }
body { display: flex; flex-direction: column; }
header { display: flex; align-items: center; justify-content: space-between; gap: 16px; padding: 10px 18px;
  background: var(--panel); border-bottom: 1px solid var(--line); }
.brand { display: flex; align-items: baseline; gap: 12px; min-width: 0; }
h1 { font-size: 18px; margin: 0; white-space: nowrap; }
.stats { color: var(--muted); font-size: 13px; white-space: nowrap; }
.search { display: flex; align-items: center; gap: 10px; }
#q { width: 320px; padding: 6px 10px; font: inherit; border: 1px solid #cbd2d9; border-radius: 6px; }
#q:focus { outline: 2px solid var(--accent); outline-offset: -1px; border-color: transparent; }
#hits { color: var(--muted); font-size: 13px; min-width: 120px; }
main { flex: 1; display: flex; min-height: 0; }
#outline { width: 36%; max-width: 520px; min-width: 280px; overflow: auto; padding: 8px 6px 24px;
  background: var(--panel); border-right: 1px solid var(--line); }
#outline ul { list-style: none; margin: 0; padding-left: 14px; }
#outline > ul { padding-left: 0; }
#outline summary, #outline li.doc { display: flex; align-items: baseline; gap: 8px; padding: 2px 6px;
  border-radius: 4px; cursor: pointer; }
#outline summary { list-style: none; }
#outline summary::-webkit-details-marker { display: none; }
#outline summary::before { content: "▸"; color: var(--muted); width: 10px; flex: none; }
#outline details[open] > summary::before { content: "▾"; }
#outline details.skill > summary { font-weight: 600; }
#outline li.doc { color: #323f4b; }
#outline li.doc::before { content: "•"; color: #9aa5b1; width: 10px; flex: none; }
#outline .title { flex: 1; min-width: 0; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
#outline .count { color: var(--muted); font-size: 12px; font-variant-numeric: tabular-nums; }
#outline summary:hover, #outline li.doc:hover { background: #f0f4f8; }
#outline .selected { background: var(--sel) !important; }
#outline .match { font-weight: 600; }
.hidden { display: none !important; }
mark { background: var(--mark); color: inherit; border-radius: 2px; padding: 0 1px; }
#right { flex: 1; display: flex; flex-direction: column; min-width: 0; padding: 10px 16px 16px; gap: 10px; overflow: auto; }
#crumbs { font-size: 13px; color: var(--muted); }
#crumbs button { font: inherit; color: var(--accent); background: none; border: 0; padding: 0; cursor: pointer; }
#crumbs button:hover { text-decoration: underline; }
#crumbs .sep { margin: 0 6px; }
#map { position: relative; height: 52vh; min-height: 260px; flex: none; border-radius: 6px; overflow: hidden; background: #d9dee4; }
.cell { position: absolute; overflow: hidden; border: 1px solid rgba(255,255,255,.9); cursor: pointer; }
.cell > .label { padding: 2px 5px; font-size: 12px; line-height: 16px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.cell.nav > .label { font-weight: 600; }
.cell.doc.big > .label { white-space: normal; display: -webkit-box; -webkit-box-orient: vertical; }
.cell .cell > .label { font-weight: 400; font-size: 11px; }
.cell:hover { filter: brightness(.96); }
.cell.dim { opacity: .35; }
.cell.hit { box-shadow: inset 0 0 0 2px #b7791f; }
.cell.match { background: var(--mark) !important; }
.cell.selected { box-shadow: inset 0 0 0 3px var(--accent); }
#details { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 14px 18px; }
#details h2 { font-size: 17px; margin: 2px 0 6px; }
#details .kind { text-transform: uppercase; letter-spacing: .06em; font-size: 11px; color: var(--muted); }
#details code { font: 12px ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; color: #52606d; word-break: break-all; }
#details p { margin: 6px 0; }
#details h3 { font-size: 12px; text-transform: uppercase; letter-spacing: .05em; color: var(--muted); margin: 14px 0 6px; }
.chips { display: flex; flex-wrap: wrap; gap: 6px; }
.chip { background: #eef2f7; border-radius: 10px; padding: 1px 9px; font-size: 12px; }
.chip small { color: var(--muted); margin-left: 4px; }
#details ul { margin: 4px 0; padding-left: 18px; }
.link { color: var(--accent); cursor: pointer; }
.link:hover { text-decoration: underline; }
.noscript { padding: 20px; }
"""

_JS = r"""
(function () {
  "use strict";
  // Every string shown comes from documents: it only ever reaches the page through textContent.
  var DATA = JSON.parse(document.getElementById("c2s-data").textContent);
  var nodes = DATA.nodes;
  var byPath = {}, byDoc = {};
  nodes.forEach(function (n, i) {
    if (n.kind === "doc") byDoc[n.path] = i; else if (n.path) byPath[n.path] = i;
  });
  var rows = [], hues = [], hits = null, selected = -1, focus = 0;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function $(id) { return document.getElementById(id); }
  function plural(n, one) { return n + " " + one + (n === 1 ? "" : "s"); }

  // A hue per skill, spread by the golden angle so neighbours differ.
  nodes[0].children.forEach(function (s, k) { hues[s] = (205 + k * 137.5) % 360; });
  function hue(i) { while (nodes[i].parent > 0) i = nodes[i].parent; return hues[i] || 210; }

  // -- outline ------------------------------------------------------------------------------------
  function outlineRow(i) {
    var n = nodes[i], li = el("li");
    if (n.kind === "doc") {
      li.className = "doc";
      li.dataset.node = i;
      li.title = n.path;
      li.append(el("span", "title", n.title));
      li.addEventListener("click", function () { select(i, false); });
      rows[i] = li;
      return li;
    }
    var d = el("details", n.kind), s = el("summary"), ul = el("ul");
    d.dataset.node = i;
    d.open = n.kind === "skill";
    s.append(el("span", "title", n.title), el("span", "count", n.size));
    s.addEventListener("click", function () { select(i, false); });
    n.children.forEach(function (c) { ul.append(outlineRow(c)); });
    d.append(s, ul);
    li.append(d);
    rows[i] = d;
    return li;
  }
  var top = el("ul");
  nodes[0].children.forEach(function (c) { top.append(outlineRow(c)); });
  $("outline").append(top);
  function rowHead(i) { return nodes[i].kind === "doc" ? rows[i] : rows[i].firstChild; }

  // -- treemap (squarified: rows of cells kept as close to square as the space allows) -------------
  function worst(row, side) {
    var sum = 0, max = 0, min = Infinity;
    row.forEach(function (a) { sum += a; max = Math.max(max, a); min = Math.min(min, a); });
    return Math.max(side * side * max / (sum * sum), (sum * sum) / (side * side * min));
  }
  function squarify(values, x, y, w, h) {
    var total = values.reduce(function (a, b) { return a + b; }, 0), out = [], i = 0;
    if (!total || w <= 0 || h <= 0) return values.map(function () { return [x, y, 0, 0]; });
    var areas = values.map(function (v) { return v * w * h / total; });
    while (i < areas.length) {
      var side = Math.min(w, h), row = [areas[i]], j = i + 1, best = worst(row, side);
      while (j < areas.length) {
        var next = worst(row.concat([areas[j]]), side);
        if (next > best) break;
        row.push(areas[j]); best = next; j++;
      }
      var sum = row.reduce(function (a, b) { return a + b; }, 0);
      if (w >= h) {
        var rw = sum / h, yy = y;
        row.forEach(function (a) { out.push([x, yy, rw, a / rw]); yy += a / rw; });
        x += rw; w -= rw;
      } else {
        var rh = sum / w, xx = x;
        row.forEach(function (a) { out.push([xx, y, a / rh, rh]); xx += a / rh; });
        y += rh; h -= rh;
      }
      i = j;
    }
    return out;
  }
  function fill(box, i, w, h, depth) {
    var kids = nodes[i].children.slice().sort(function (a, b) { return nodes[b].size - nodes[a].size || a - b; });
    var rects = squarify(kids.map(function (k) { return nodes[k].size; }), 0, 0, w, h);
    kids.forEach(function (k, j) {
      var n = nodes[k], r = rects[j], cell = el("div", "cell " + (n.kind === "doc" ? "doc" : "nav"));
      cell.dataset.cell = k;
      cell.style.left = r[0] + "px"; cell.style.top = r[1] + "px";
      cell.style.width = r[2] + "px"; cell.style.height = r[3] + "px";
      cell.style.background = "hsl(" + hue(k) + "," + (depth ? 42 : 48) + "%," + (n.kind === "doc" ? 95 : depth ? 88 : 79) + "%)";
      cell.title = n.title + (n.kind === "doc" ? "" : " — " + plural(n.size, "document"));
      if (hits) {
        if (n.kind === "doc" ? hits[k] : hits[k] > 0) cell.classList.add(n.kind === "doc" ? "match" : "hit");
        else cell.classList.add("dim");
      }
      if (k === selected) cell.classList.add("selected");
      if (r[2] > (depth ? 56 : 36) && r[3] > 16) {
        var label = el("div", "label", n.kind === "doc" ? n.title : n.title + " · " + n.size);
        if (n.kind === "doc" && !depth && r[2] > 100) {  // room to wrap a title over a few lines
          cell.classList.add("big");
          label.style.webkitLineClamp = String(Math.max(1, Math.floor((r[3] - 6) / 16)));
        }
        cell.append(label);
      }
      if (!depth && n.children.length && r[2] > 60 && r[3] > 48) {
        var inner = el("div");
        inner.style.position = "absolute"; inner.style.left = "3px"; inner.style.top = "20px";
        inner.style.right = "3px"; inner.style.bottom = "3px";
        cell.append(inner);
        fill(inner, k, r[2] - 8, r[3] - 25, 1);
      }
      cell.addEventListener("click", function (ev) { ev.stopPropagation(); select(k, true); });
      box.append(cell);
    });
  }
  function drawMap() {
    var map = $("map"), crumbs = $("crumbs"), path = [], i = focus;
    map.replaceChildren();
    fill(map, focus, map.clientWidth, map.clientHeight, 0);
    for (; i >= 0; i = nodes[i].parent) path.unshift(i);
    crumbs.replaceChildren();
    path.forEach(function (p, k) {
      if (k) crumbs.append(el("span", "sep", "›"));
      var b = el("button", "", k ? nodes[p].title : "All skills");
      b.type = "button";
      b.addEventListener("click", function () { if (p) select(p, true); else { focus = 0; drawMap(); } });
      crumbs.append(b);
    });
  }
  var resizing;
  window.addEventListener("resize", function () { clearTimeout(resizing); resizing = setTimeout(drawMap, 80); });

  // -- details ------------------------------------------------------------------------------------
  function link(i, text) {
    var a = el("span", "link", text);
    a.tabIndex = 0;
    a.addEventListener("click", function () { select(i, true); });
    a.addEventListener("keydown", function (ev) { if (ev.key === "Enter") select(i, true); });
    return a;
  }
  function drawDetails(i) {
    var n = nodes[i], box = $("details"), ul;
    box.replaceChildren();
    var kinds = { skill: "Skill", group: "Group", doc: "Document" };
    box.append(el("div", "kind", kinds[n.kind] + (n.kind === "doc" ? "" : " · " + plural(n.size, "document"))));
    box.append(el("h2", "", n.title));
    box.append(el("code", "", n.path));
    if (n.kind === "doc") {
      if (n.one_line) box.append(el("p", "", n.one_line));
      if (n.phrases.length) {
        box.append(el("h3", "", "Key phrases"));
        var ph = el("div", "chips");
        n.phrases.forEach(function (p) { ph.append(el("span", "chip", p)); });
        box.append(ph);
      }
      if ((n.identifiers || []).length) {
        box.append(el("h3", "", "Identifiers"));
        var ids = el("div", "chips");
        n.identifiers.forEach(function (x) { ids.append(el("code", "chip", x)); });
        box.append(ids);
      }
      box.append(el("h3", "", "Filed under"));
      var p = el("p");
      p.append(link(n.parent, nodes[n.parent].title));
      box.append(p);
      return;
    }
    if (n.description) box.append(el("p", "", n.description));
    if (n.summary && n.summary !== n.description) box.append(el("p", "summary", n.summary));
    if (n.entities.length) {
      box.append(el("h3", "", "Entities"));
      var chips = el("div", "chips");
      n.entities.forEach(function (e) {
        var c = el("span", "chip", e[0]);
        if (e[1]) c.append(el("small", "", e[1]));
        c.title = e[1] ? plural(e[1], "mention") : "";
        chips.append(c);
      });
      box.append(chips);
    }
    if (n.see.length) {
      box.append(el("h3", "", "See also"));
      ul = el("ul");
      n.see.forEach(function (s) {
        var li = el("li"), target = s.doc !== undefined ? byDoc[s.doc] : byPath[s.group];
        li.append(target === undefined ? el("span", "", s.title) : link(target, s.title));
        ul.append(li);
      });
      box.append(ul);
    }
    if (n.related.length) {
      box.append(el("h3", "", "Related skills"));
      ul = el("ul");
      n.related.forEach(function (r) {
        var li = el("li"), target = byPath[r.path];
        li.append(target === undefined ? el("span", "", r.name) : link(target, nodes[target].title));
        if (r.note) li.append(el("span", "", " — " + r.note));
        ul.append(li);
      });
      box.append(ul);
    }
  }
  function drawOverview() {
    var box = $("details"), ul = el("ul");
    box.replaceChildren(el("div", "kind", DATA.corpus), el("h2", "", "Skills"));
    box.append(el("p", "", "Pick a skill, group or document in the outline or the treemap; search finds documents by title."));
    nodes[0].children.forEach(function (s) {
      var li = el("li");
      li.append(link(s, nodes[s].title), el("span", "", " — " + nodes[s].description));
      ul.append(li);
    });
    box.append(ul);
  }

  // -- selection ----------------------------------------------------------------------------------
  function select(i, scroll) {
    if (selected >= 0) rowHead(selected).classList.remove("selected");
    selected = i;
    rowHead(i).classList.add("selected");
    for (var p = nodes[i].parent; p > 0; p = nodes[p].parent) rows[p].open = true;
    if (scroll) rowHead(i).scrollIntoView({ block: "nearest" });
    focus = nodes[i].children.length ? i : Math.max(nodes[i].parent, 0);
    drawDetails(i);
    drawMap();
  }

  // -- search over document titles ------------------------------------------------------------------
  function highlight(span, title, q) {
    span.replaceChildren();
    var lower = title.toLowerCase(), at = q ? lower.indexOf(q) : -1;
    if (at < 0) { span.textContent = title; return; }
    if (lower.length !== title.length) { span.append(el("mark", "", title)); return; }  // case folding moved offsets
    var from = 0;
    for (; at >= 0; at = lower.indexOf(q, from)) {
      span.append(document.createTextNode(title.slice(from, at)), el("mark", "", title.slice(at, at + q.length)));
      from = at + q.length;
    }
    span.append(document.createTextNode(title.slice(from)));
  }
  var first = -1, opened = null;
  function search() {
    var q = $("q").value.trim().toLowerCase(), found = 0;
    // Search opens the branches with matches; clearing it puts the outline back as it was.
    if (q && !opened) opened = rows.map(function (r) { return r.open; });
    hits = q ? nodes.map(function () { return 0; }) : null;
    first = -1;
    nodes.forEach(function (n, i) {
      if (n.kind !== "doc") return;
      var m = !!q && n.title.toLowerCase().indexOf(q) >= 0;
      if (m || rows[i].classList.contains("match")) highlight(rows[i].firstChild, n.title, m ? q : "");
      rows[i].classList.toggle("match", m);
      rows[i].classList.toggle("hidden", !!q && !m);
      if (m) {
        found++;
        if (first < 0) first = i;
        hits[i] = 1;
        for (var p = n.parent; p > 0; p = nodes[p].parent) hits[p]++;
      }
    });
    nodes.forEach(function (n, i) {
      if (n.kind === "doc" || !i) return;
      rows[i].parentNode.classList.toggle("hidden", !!q && !hits[i]);
      if (q) rows[i].open = hits[i] > 0;
      else if (opened) rows[i].open = opened[i];
    });
    if (!q) {
      opened = null;
      if (selected >= 0) for (var p = nodes[selected].parent; p > 0; p = nodes[p].parent) rows[p].open = true;
    }
    $("hits").textContent = q ? found + " of " + plural(DATA.counts.doc, "document") : "";
    if (q && first >= 0 && focus && !hits[focus]) focus = 0;
    drawMap();
  }
  var typing;
  $("q").addEventListener("input", function () { clearTimeout(typing); typing = setTimeout(search, 60); });
  $("q").addEventListener("keydown", function (ev) {
    if (ev.key === "Enter") { clearTimeout(typing); search(); if (first >= 0) select(first, true); }
    if (ev.key === "Escape") { $("q").value = ""; search(); }
  });

  drawOverview();
  drawMap();
  document.body.dataset.ready = "1";
})();
"""

