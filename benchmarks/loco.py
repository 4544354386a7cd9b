"""Choose a navigation constant leave-one-corpus-out over the development corpora.

A value fitted on one corpus is a guess about the others. For one constant and its candidate
values this script answers every question of every development set (``nav_dev.CORPORA``) at
each value, then, for each corpus in turn, picks the value the *other* corpora prefer and
reports the left-out corpus at that value, with its paired-bootstrap interval against the best
flat method. Only what transfers to a corpus that took no part in the choice is evidence.

A corpus's preference is its *margin*: per set, the smaller of routed recall@5 / best flat
(target 1.0) and navigator-only recall@5 / (0.95 × best flat), averaged over the corpus's sets
so each corpus weighs the same however many question sets it has. For a constant that changes
routed answers only (``--routed-only``) the margin is the routed ratio alone: the navigator-only
answers are the same at every value, and a corpus whose navigator alone is far short would
otherwise have no say. The training corpora choose
the value with the best worst margin (ties: the best mean margin, then the shipped default), so
one corpus cannot buy a gain with another's loss. The value to ship is chosen the same way over
all corpora, and is not taken if any corpus is worse at it than at the default beyond its
interval (a paired bootstrap of the per-question difference, p < 0.05), nor if no corpus gains
at it where it was chosen without that corpus: a value only the corpus it helps would choose is a
fit to that corpus.

    .venv/bin/python benchmarks/loco.py --constant ROUTE_BELOW --values 0.6,0.7,0.8,0.9,1.01
    .venv/bin/python benchmarks/loco.py --constant ROUTE_RRF_K --values 3,5,10 --json out.json

``ROUTE_BELOW`` (the routing threshold) is exact from one navigator-only and one always-routed
run per set. Any other constant is a module-level name of the navigation code (``c2s_core`` or
``c2s_agent``), set in every module that holds it before the questions are answered again.
The trees are ``nav_dev.py``'s (built and compiled there on first use, then reused).

A constant of the compiler (``c2s_pipeline``) shapes the trees, and the compile runs in a process of
its own: each value's answers come from a ``nav_dev.py --json`` run on trees compiled at that value
(its own ``--cache``), named with ``--compiled VALUE=REPORT,...`` (a value may name several reports,
e.g. one per group of corpora run side by side)::

    .venv/bin/python benchmarks/loco.py --constant CENTROID_SHARE --compiled 0=text.json,0.5=mixed.json

The same scores a navigation constant whose values were answered in separate runs (e.g. one per
group of corpora, side by side) instead of in loco's own process.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import nav_bench  # noqa: E402
import nav_dev  # noqa: E402

ROUTE_BELOW = "ROUTE_BELOW"


def holders(name: str) -> list:
    """The project's loaded modules that bind ``name`` (a constant imported by name is one
    binding per importing module)."""
    import c2s_agent.offline_navigator  # noqa: F401  (loads the navigation code)
    import c2s_pipeline.assets  # noqa: F401  (and the compiler's stages, for --compiled)

    return [m for key, m in sorted(sys.modules.items())
            if key.startswith(("c2s_core", "c2s_agent", "c2s_pipeline")) and m is not None and hasattr(m, name)]


def set_constant(name: str, value: float) -> float:
    """Sets ``name`` in every module holding it; returns the value it had."""
    modules = holders(name)
    if not modules:
        raise SystemExit(f"error: no navigation module defines {name}")
    old = getattr(modules[0], name)
    for m in modules:
        setattr(m, name, type(old)(value))
    return old


def scores_at(sets: list[dict], name: str, values: list[float], limit: int | None, routed_only: bool = False) -> dict:
    """``{value: {set name: {"routed": [...], "navigator-only": [...], "best": [...]}}}``:
    recall@5 per question at each value, and the best flat method's (fixed by the set).
    ``routed_only``: the constant changes routed answers only, so navigator-only ones are kept.
    Sets that already carry a ``report`` (read from ``nav_dev.py --json``) serve ROUTE_BELOW as is."""
    out: dict[float, dict] = {}
    if name == ROUTE_BELOW:
        todo = [s for s in sets if "report" not in s]
        if todo:
            nav_dev.evaluate_sets(todo, limit, quiet=True)
        for v in values:
            out[v] = {}
            for s in sets:
                r = s["report"]
                per = r["per_query"]
                out[v][s["name"]] = {
                    "routed": [q["always_routed"] if q["confidence"] < v else q["navigator-only"] for q in per],
                    "navigator-only": [q["navigator-only"] for q in per], "best": [q[r["best_flat"]] for q in per]}
        return out
    default = set_constant(name, values[0])
    saved = [s for s in sets if "report" in s]  # the default's answers, from nav_dev.py --json
    try:
        for v in sorted(values, key=lambda v: v != default):  # the default first: its answers may be saved
            set_constant(name, v)
            if v == default and saved:
                for s in saved:
                    nav_bench.seed_answers(s["tree"], s["qa"], s["report"]["per_query"])
            else:
                for key in [k for k in nav_bench._ANSWERS if k[2] or not routed_only]:  # (tree, question, route)
                    del nav_bench._ANSWERS[key]  # answers depend on the constant
            nav_dev.log(f"{name} = {v}")
            nav_dev.evaluate_sets(sets, limit, quiet=True)
            out[v] = {s["name"]: answers(s["report"]) for s in sets}
    finally:
        set_constant(name, default)
    return out


def answers(report: dict) -> dict[str, list[float]]:
    """A set's recall@5 per question, routed and navigator-only, and its best flat method's."""
    per = report["per_query"]
    return {run: [q[run] for q in per] for run in ("routed", "navigator-only")} | {"best": [q[report["best_flat"]] for q in per]}


def compiled_scores(pairs: str, names: list[str]) -> tuple[dict, list[dict]]:
    """``VALUE=REPORT,...`` -> (scores as :func:`scores_at` gives them, the sets): each value's
    answers from ``nav_dev.py --json`` reports on trees compiled at that value. Every value must
    answer the same questions of the same sets."""
    reports: dict[float, list[dict]] = {}
    for pair in pairs.split(","):
        value, sep, path = pair.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = None
        if not sep or not path or number is None:
            raise SystemExit(f"error: --compiled wants VALUE=REPORT pairs with a number for VALUE, got {pair!r}")
        try:
            saved = json.loads(Path(path).read_text(encoding="utf-8"))["sets"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SystemExit(f"error: {path}: not a `nav_dev.py --json` report ({exc!r})") from exc
        reports.setdefault(number, []).extend(s for s in saved if s["corpus"] in names)
    scores, asked = {}, {}
    for value, sets in reports.items():
        scores[value] = {s["name"]: answers(s["report"]) for s in sets}
        questions = {s["name"]: [q["id"] for q in s["report"]["per_query"]] for s in sets}
        if asked and questions != asked:
            raise SystemExit(f"error: the reports of {value:g} answer other sets or questions than the first value's")
        asked = questions
    return scores, next(iter(reports.values()))


def mean(xs: list[float]) -> float:
    return sum(xs) / max(1, len(xs))


def margin(per: dict, routed_only: bool = False) -> float:
    """A set's distance from its targets: the smaller of its two ratios to them, or with
    ``routed_only`` the routed one alone (the navigator-only answers are the same at every value:
    on a set whose navigator alone is far short, the smaller ratio would hide every routed
    difference, and that corpus would have no say)."""
    best = mean(per["best"]) or 1.0
    routed = mean(per["routed"]) / best / nav_dev.TARGETS["routed"]
    if routed_only:
        return routed
    return min(routed, mean(per["navigator-only"]) / best / nav_dev.TARGETS["navigator-only"])


def corpus_margins(scores: dict, sets: list[dict], routed_only: bool = False) -> dict[float, dict[str, float]]:
    corpora = dict.fromkeys(s["corpus"] for s in sets)
    return {v: {c: mean([margin(per[s["name"]], routed_only) for s in sets if s["corpus"] == c]) for c in corpora}
            for v, per in scores.items()}


def choose(margins: dict[float, dict[str, float]], corpora: list[str], default: float) -> float:
    """The value with the best worst margin over ``corpora``, then the best mean, then the default
    (which is all there is to go by with no corpus to choose)."""
    if not corpora:
        return default
    def key(v: float) -> tuple:
        m = [margins[v][c] for c in corpora]
        return (round(min(m), 4), round(mean(m), 4), v == default)
    return max(margins, key=key)


def leave_one_out(margins: dict[float, dict[str, float]], corpora: list[str], default: float) -> list[dict]:
    """Per corpus left out: the value the others choose (``chosen``) and the corpus's margin there
    and at the default."""
    rows = []
    for held in corpora:
        v = choose(margins, [c for c in corpora if c != held], default)
        rows.append({"left_out": held, "chosen": v, "margin": margins[v][held], "margin_default": margins[default][held]})
    return rows


def transferred(loco: list[dict], value: float) -> list[str]:
    """The left-out corpora given ``value`` by the others whose margin is better there than at the
    default: where a value chosen without a corpus helped it."""
    return [row["left_out"] for row in loco if row["chosen"] == value and row["margin"] > row["margin_default"]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--constant", required=True, help="ROUTE_BELOW, or a module-level constant of the navigation code (or, with --compiled, of the compiler)")
    ap.add_argument("--values", help="comma list of candidate values")
    ap.add_argument("--corpora", default=",".join(nav_dev.BY_NAME))
    ap.add_argument("--cache", type=Path, default=nav_dev.CACHE)
    ap.add_argument("--limit", type=int, help="questions per set (a quick run)")
    ap.add_argument("--routed-only", action="store_true",
                    help="the constant changes routed answers only: answer navigator-only questions once")
    ap.add_argument("--reports", type=Path,
                    help="the sets' reports from `nav_dev.py --json`: the default's answers (taken as they were) and, "
                         "for ROUTE_BELOW, every value's")
    ap.add_argument("--compiled", help="VALUE=REPORT,...: each value's answers from `nav_dev.py --json` reports "
                                       "(a compiler constant's on trees compiled at it; replaces --values)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if not args.values and not args.compiled:
        ap.error("--values or --compiled is required")

    from c2s_agent.evaluation.metrics import paired_bootstrap

    names = [n.strip() for n in args.corpora.split(",") if n.strip()]
    held = [] if args.constant == ROUTE_BELOW else holders(args.constant)
    if args.constant == ROUTE_BELOW:
        from c2s_agent.offline_navigator import ROUTE_BELOW as default
    else:
        default = float(getattr(held[0], args.constant)) if held else None
    if default is None:
        raise SystemExit(f"error: no navigation module defines {args.constant}")
    if not args.compiled and held and all(m.__name__.startswith("c2s_pipeline") for m in held):
        # set in this process it would change nothing: the trees were compiled before
        raise SystemExit(f"error: {args.constant} is the compiler's: answer each value on trees compiled at it "
                         "(--compiled)")
    if args.compiled:
        scores, sets = compiled_scores(args.compiled, names)
        values = list(scores)
    else:
        values = [float(v) for v in args.values.split(",")]
        if args.reports:
            saved = json.loads(args.reports.read_text(encoding="utf-8"))["sets"]
            style = {d.name: d.style for c in nav_dev.CORPORA for d in c.sets}
            sets = [{**s, "tree": Path(s["tree"]), "qa": Path(s["qa"]), "page_level": s["report"]["page_level"],
                     "style": style[s["name"]]} for s in saved if s["corpus"] in names]
        else:
            sets, _, _ = nav_dev.prepare(names, args.cache.resolve(), recompile=False)
    if args.compiled and default not in values:
        raise SystemExit(f"error: --compiled names no report at the shipped value {default:g}")
    if default not in values:
        values.append(default)
    if not args.compiled:
        scores = scores_at(sets, args.constant, values, args.limit, args.routed_only)
    margins = corpus_margins(scores, sets, args.routed_only)
    corpora = list(dict.fromkeys(s["corpus"] for s in sets))

    print(f"\n## {args.constant}: recall@5 per set (routed / navigator-only), best flat beside")
    print("| value | " + " | ".join(s["name"] for s in sets) + " | worst corpus margin |")
    print("|---:|" + "---|" * len(sets) + "---:|")
    print("| best flat | " + " | ".join(f"{mean(scores[values[0]][s['name']]['best']):.3f}" for s in sets) + " | |")
    for v in values:
        cells = [f"{mean(scores[v][s['name']]['routed']):.3f} / {mean(scores[v][s['name']]['navigator-only']):.3f}"
                 for s in sets]
        mark = " (default)" if v == default else ""
        print(f"| {v:g}{mark} | " + " | ".join(cells) + f" | {min(margins[v].values()):.3f} |")

    print("\n## Leave one corpus out: each corpus at the value the others choose")
    print("| left out | chosen by the others | routed / best flat [95% CI] | navigator-only / best flat [95% CI] | "
          "margin at chosen | margin at default |")
    print("|---|---:|---|---|---:|---:|")
    loco = leave_one_out(margins, corpora, default)
    for row in loco:
        held, v = row["left_out"], row["chosen"]
        cells = []
        for run in ("routed", "navigator-only"):
            a = [x for s in sets if s["corpus"] == held for x in scores[v][s["name"]][run]]
            b = [x for s in sets if s["corpus"] == held for x in scores[v][s["name"]]["best"]]
            low, high = nav_bench.ratio_interval(a, b)
            cells.append(f"{mean(a) / (mean(b) or 1):.3f} [{low:.2f}, {high:.2f}]")
        print(f"| {held} | {v:g} | {cells[0]} | {cells[1]} | {row['margin']:.3f} | {row['margin_default']:.3f} |")

    chosen = choose(margins, corpora, default)
    worse = []
    for s in sets:
        for run in ("routed", "navigator-only"):
            b = paired_bootstrap(scores[chosen][s["name"]][run], scores[default][s["name"]][run],
                                 metric="recall@5", method=str(chosen), baseline=str(default))
            if b.verdict == "loss":
                worse.append(f"{s['name']} ({run}: {b.diff:+.3f}, p={b.p_value:.3f})")
    agree = sum(row["chosen"] == chosen for row in loco)
    print(f"\nover all corpora: {chosen:g} (default {default:g}); the left-out choices agree with it on {agree} of "
          f"{len(loco)} corpora")
    transfers = transferred(loco, chosen)
    taken = chosen != default and bool(transfers) and not worse
    if chosen != default:
        print("worse than the default beyond its interval on: " + (", ".join(worse) if worse else "no set"))
        print("better where it was chosen without the corpus: " + (", ".join(transfers) if transfers else "no corpus")
              + ("  -> take it" if taken else "  -> not taken"))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "constant": args.constant, "values": values, "default": default, "chosen": chosen, "worse": worse,
            "transferred": transfers, "taken": taken,
            "margins": {str(v): m for v, m in margins.items()}, "loco": loco,
            "recall@5": {str(v): {name: {run: mean(x) for run, x in per.items()} for name, per in sc.items()}
                         for v, sc in scores.items()},
            "per_question": {str(v): sc for v, sc in scores.items()}}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
