"""S3 for real deployments: corpora read from ``s3://bucket/prefix/``, trees published to
``s3://bucket/prefix/<corpus>/``.

A published tree on S3 is a release folder plus a pointer: files go to
``<prefix>/<corpus>/releases/<build>/`` first, then ``<prefix>/<corpus>/CURRENT`` is overwritten
with the build id (one PUT, atomic for readers), so nobody ever reads a half-uploaded tree.
Older releases beyond the last few are deleted afterwards.
"""

from __future__ import annotations

import json
import mimetypes
from pathlib import Path
from urllib.parse import urlparse

from c2s_core.text import sha256_hex

KEEP_RELEASES = 3


def s3_client(s3):
    """The boto3 client of ``s3``: an ``S3Resource`` (sensors, the schedule, the CLI) or the client
    itself, which is what dagster-aws puts on an asset's context for its ``s3`` resource."""
    get_client = getattr(s3, "get_client", None)
    return get_client() if get_client is not None else s3


def is_s3(uri: str) -> bool:
    return uri.startswith("s3://")


def split_s3(uri: str) -> tuple[str, str]:
    parsed = urlparse(uri)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise ValueError(f"not an S3 URI: {uri!r} (expected s3://bucket/prefix/)")
    prefix = parsed.path.lstrip("/")
    return parsed.netloc, (prefix.rstrip("/") + "/") if prefix else ""


def _objects(client, uri: str) -> list[dict]:
    bucket, prefix = split_s3(uri)
    found = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        found += [o for o in page.get("Contents", []) if not o["Key"].endswith("/")]
    return sorted(found, key=lambda o: o["Key"])


def s3_fingerprint(client, uri: str) -> str:
    """Keys, sizes and ETags under the prefix: changes when any object does."""
    objects = _objects(client, uri)
    if not objects:
        return "missing"
    return sha256_hex(*(f"{o['Key']}\t{o['Size']}\t{o['ETag']}" for o in objects))[:24]


def download_prefix(client, uri: str, dest: Path) -> Path:
    """Mirror the objects under ``uri`` into ``dest`` (keys relative to the prefix become paths),
    fetching only objects whose ETag changed and removing local files that vanished."""
    bucket, prefix = split_s3(uri)
    dest.mkdir(parents=True, exist_ok=True)
    ledger_path = dest.parent / f"{dest.name}.etags.json"
    ledger = json.loads(ledger_path.read_text()) if ledger_path.exists() else {}
    seen = {}
    for obj in _objects(client, uri):
        rel = obj["Key"][len(prefix):]
        target = (dest / rel).resolve()
        if not target.is_relative_to(dest.resolve()) or not rel:
            raise ValueError(f"refusing S3 key {obj['Key']!r}: it maps outside the download folder")
        seen[rel] = obj["ETag"]
        if ledger.get(rel) != obj["ETag"] or not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(bucket, obj["Key"], str(target))
    for rel in set(ledger) - set(seen):
        (dest / rel).unlink(missing_ok=True)
    ledger_path.write_text(json.dumps(seen, sort_keys=True))
    return dest


def publish_tree(client, tree: Path, uri: str, corpus: str, build: str) -> str:
    """Upload ``tree`` as a new release of ``corpus`` and point CURRENT at it; returns the release URI."""
    bucket, prefix = split_s3(uri)
    base = f"{prefix}{corpus}/"
    release = f"{base}releases/{build}/"
    for path in sorted(p for p in tree.rglob("*") if p.is_file()):
        content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        client.upload_file(str(path), bucket, release + path.relative_to(tree).as_posix(),
                           ExtraArgs={"ContentType": content_type})
    client.put_object(Bucket=bucket, Key=f"{base}CURRENT", Body=build.encode(), ContentType="text/plain")
    releases = sorted({o["Key"][len(base) + len("releases/"):].split("/", 1)[0]
                       for o in _objects(client, f"s3://{bucket}/{base}releases/")})
    for old in releases[:-KEEP_RELEASES]:
        if old == build:
            continue
        for obj in _objects(client, f"s3://{bucket}/{base}releases/{old}/"):
            client.delete_object(Bucket=bucket, Key=obj["Key"])
    return f"s3://{bucket}/{release}"


def current_release(client, uri: str, corpus: str) -> str:
    bucket, prefix = split_s3(uri)
    build = client.get_object(Bucket=bucket, Key=f"{prefix}{corpus}/CURRENT")["Body"].read().decode().strip()
    return f"s3://{bucket}/{prefix}{corpus}/releases/{build}/"
