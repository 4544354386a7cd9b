"""Level-1 clustering at scale: exact K-Means against the staged (blocked) K-Means that
``c2s_pipeline.hierarchy.kmeans`` switches to above ``EXACT_KMEANS_ITEMS`` items, side by side
in one run, on real embeddings (and, where a size takes three stages or more, the two stages
every size took before).

The items are Debian package descriptions (``apt-cache dumpavail``: package name and one-line
description, about 60,000 packages, duplicates dropped), embedded by the bundled encoder: an
evenly strided, deterministic sample of the largest size asked, each smaller size strided from it. Embeddings are cached under
``benchmarks/.cache/cluster-bench/`` (gitignored), so a second run only clusters.

    .venv/bin/python benchmarks/cluster_bench.py                       # 2k, 4k, 8k, 20k items
    .venv/bin/python benchmarks/cluster_bench.py --sizes 2000,50000 --exact-up-to 20000 --json out.json
    .venv/bin/python benchmarks/cluster_bench.py --vectors HOME/artifacts/debian/doc_vectors.npy \
        --sizes 20000,35000,52988 --exact-up-to 0                  # a compile's own document vectors

For each size N: k = ceil(N/p) clusters (p = 10, as a compile's level 1), the seconds each method
takes, their mean cohesion (members' mean cosine to their cluster centroid, the compile's own
measure) and the ratios. Both run with the compile's settings (n_init=3, the same seed). Absolute
times depend on the machine's load; the ratios are measured in the same process, one after the
other.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.cluster import KMeans

from c2s_core.encoder import BUNDLED_MODEL, Encoder
from c2s_pipeline import hierarchy

CACHE = Path(__file__).resolve().parent / ".cache" / "cluster-bench"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
DEFAULT_SIZES = (2000, 4000, 8000, 20000)


def package_descriptions() -> list[str]:
    """``<package>: <one-line description>`` for every package apt knows, sorted by package
    name, each description once (the first package, by name, that has it)."""
    try:
        out = subprocess.run(["apt-cache", "dumpavail"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(f"cluster_bench: apt-cache dumpavail failed ({exc}); this benchmark needs apt's "
                         "package lists (run `apt-get update`)") from None
    found: dict[str, str] = {}
    for stanza in out.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line.startswith(" "))
        if "Package" in fields and "Description" in fields:
            found.setdefault(fields["Package"], fields["Description"].strip())
    seen: set[str] = set()
    texts = []
    for package in sorted(found):
        if found[package].lower() not in seen:
            seen.add(found[package].lower())
            texts.append(f"{package}: {found[package]}")
    return texts


def strided(texts: list[str], n: int) -> list[str]:
    """``n`` of ``texts``, evenly spaced (the first and the last included)."""
    if n > len(texts):
        raise SystemExit(f"cluster_bench: {n} items asked for, apt lists {len(texts)} distinct descriptions")
    return [texts[i] for i in np.linspace(0, len(texts) - 1, n).round().astype(int)]


def embeddings(texts: list[str]) -> np.ndarray:
    """The bundled encoder's vectors for ``texts``, cached by their content."""
    digest = hashlib.sha256(("\n".join(texts) + BUNDLED_MODEL).encode()).hexdigest()[:16]
    path = CACHE / f"debian-descriptions-{len(texts)}-{digest}.npy"
    if path.exists():
        return np.load(path)
    started = time.perf_counter()
    vectors = Encoder().encode(texts)
    print(f"  embedded {len(texts)} descriptions in {time.perf_counter() - started:.0f} s (cached in {path})",
          file=sys.stderr)
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def cohesion(unit: np.ndarray, labels: np.ndarray) -> float:
    groups = [np.flatnonzero(labels == c).tolist() for c in np.unique(labels)]
    return float(np.mean(hierarchy.cohesion(unit, groups)))


def measure(unit: np.ndarray, p: int, exact: bool) -> dict:
    k = hierarchy.cluster_count(len(unit), p)
    stages = hierarchy.stage_count(k)
    row: dict = {"items": len(unit), "k": k, "stages": stages, "blocks": hierarchy.block_count(k, stages)}
    started = time.perf_counter()
    labels = hierarchy.blocked_kmeans(unit, k)
    row["blocked_s"] = round(time.perf_counter() - started, 2)
    row["blocked_cohesion"] = round(cohesion(unit, labels), 4)
    assert len(np.unique(labels)) == k
    if stages > 2:  # beside the two stages every size took before
        started = time.perf_counter()
        labels = hierarchy.blocked_kmeans(unit, k, stages=2)
        row["two_stage_s"] = round(time.perf_counter() - started, 2)
        row["two_stage_cohesion"] = round(cohesion(unit, labels), 4)
    if exact:
        started = time.perf_counter()
        labels = KMeans(n_clusters=k, n_init=3, random_state=hierarchy.SEED).fit_predict(unit)
        row["exact_s"] = round(time.perf_counter() - started, 2)
        row["exact_cohesion"] = round(cohesion(unit, labels), 4)
        row["speedup"] = round(row["exact_s"] / row["blocked_s"], 2)
        row["cohesion_delta"] = round(row["blocked_cohesion"] - row["exact_cohesion"], 4)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="comma-separated item counts")
    parser.add_argument("--p", type=int, default=10, help="branching ratio: k = ceil(N/p)")
    parser.add_argument("--exact-up-to", type=int, default=max(DEFAULT_SIZES),
                        help="run exact K-Means only up to this many items (its time grows with N²)")
    parser.add_argument("--vectors", type=Path, metavar="NPY",
                        help="cluster these vectors instead (a compile's artifacts/<corpus>/doc_vectors.npy), "
                             "each size strided from them")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    if args.vectors:
        largest = hierarchy.normalise(np.load(args.vectors))
        if sizes[-1] > len(largest):
            raise SystemExit(f"cluster_bench: {sizes[-1]} items asked for, {args.vectors} holds {len(largest)}")
        print(f"{len(largest)} vectors from {args.vectors}; sizes {sizes}; p={args.p}", file=sys.stderr)
    else:
        texts = package_descriptions()
        print(f"{len(texts)} distinct Debian package descriptions; sizes {sizes}; p={args.p}", file=sys.stderr)
        # One embedded sample at the largest size; smaller sizes are strided from it.
        largest = hierarchy.normalise(embeddings(strided(texts, sizes[-1])))
    rows = []
    header = f"{'items':>6} {'k':>5} {'stages':>6} {'blocks':>6} {'exact s':>8} {'blocked s':>9} {'speedup':>7} " \
             f"{'exact coh':>9} {'blocked coh':>11} {'delta':>7} {'2-stage s':>9} {'2-stage coh':>11}"
    print(header)
    for n in sizes:
        unit = largest[np.linspace(0, len(largest) - 1, n).round().astype(int)]
        row = measure(unit, args.p, exact=n <= args.exact_up_to)
        rows.append(row)
        dash = "-"
        print(f"{row['items']:>6} {row['k']:>5} {row['stages']:>6} {row['blocks']:>6} {row.get('exact_s', dash):>8} "
              f"{row['blocked_s']:>9} {row.get('speedup', dash):>7} {row.get('exact_cohesion', dash):>9} "
              f"{row['blocked_cohesion']:>11} {row.get('cohesion_delta', dash):>7} "
              f"{row.get('two_stage_s', dash):>9} {row.get('two_stage_cohesion', dash):>11}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"p": args.p, "threshold": hierarchy.EXACT_KMEANS_ITEMS, "rows": rows},
                                        indent=2) + "\n")


if __name__ == "__main__":
    main()
