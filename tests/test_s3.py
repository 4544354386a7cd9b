"""Reading a corpus from S3 and publishing trees there, against a real S3-compatible server
(moto's standalone server) started on 127.0.0.1."""

import socket

import boto3
import pytest
from dagster_aws.s3 import S3Resource
from moto.server import ThreadedMotoServer

from c2s_pipeline.compiler import compile_corpus
from c2s_pipeline.storage import current_release, s3_fingerprint
from c2s_pipeline.workspace import CorpusSpec, Workspace

from .conftest import SAMPLE_CORPUS

BUCKET = "c2s-test"


@pytest.fixture(scope="module")
def s3_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    settings = dict(endpoint_url=url, aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1")
    client = boto3.client("s3", **settings)
    client.create_bucket(Bucket=BUCKET)
    # Runs configure S3 as a deployment does: from the AWS variables (never secrets in run config).
    with pytest.MonkeyPatch.context() as env:
        for name, value in (("AWS_ENDPOINT_URL", url), ("AWS_ACCESS_KEY_ID", "test"),
                            ("AWS_SECRET_ACCESS_KEY", "test"), ("AWS_DEFAULT_REGION", "us-east-1")):
            env.setenv(name, value)
        yield client, S3Resource(**settings)
    server.stop()


def upload_corpus(client, prefix, files):
    for path in files:
        client.upload_file(str(path), BUCKET, prefix + path.relative_to(SAMPLE_CORPUS).as_posix())


def release_files(client, release_uri):
    prefix = release_uri.split(f"s3://{BUCKET}/", 1)[1]
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return {o["Key"][len(prefix):]: o for page in pages for o in page.get("Contents", [])}


def test_compile_from_s3_and_publish_releases(s3_server, tmp_path):
    client, resource = s3_server
    files = sorted(SAMPLE_CORPUS.rglob("*.md"))[:30]
    upload_corpus(client, "corpora/tidewell/", files)
    source = f"s3://{BUCKET}/corpora/tidewell/"
    spec = CorpusSpec(name="tidewell-s3", source=source, out=str(tmp_path / "out"), publish=f"s3://{BUCKET}/trees/")
    workspace = Workspace(tmp_path / "home")
    first_fp = s3_fingerprint(client, source)

    manifest = compile_corpus(spec, workspace)
    assert manifest["stats"]["documents"]["accepted"] == 30
    assert set(manifest["doc_paths"]) == {f.relative_to(SAMPLE_CORPUS).as_posix() for f in files}
    release = current_release(client, f"s3://{BUCKET}/trees/", "tidewell-s3")
    uploaded = release_files(client, release)
    local = {p.relative_to(tmp_path / "out").as_posix(): p for p in (tmp_path / "out").rglob("*") if p.is_file()}
    assert set(uploaded) == set(local)
    for rel, path in local.items():
        body = client.get_object(Bucket=BUCKET, Key=uploaded[rel]["Key"])["Body"].read()
        assert body == path.read_bytes(), rel

    # A changed object changes the fingerprint; the recompile publishes a new release and moves CURRENT.
    client.put_object(Bucket=BUCKET, Key="corpora/tidewell/" + files[0].relative_to(SAMPLE_CORPUS).as_posix(),
                      Body=files[0].read_bytes() + b"\n\nNew: refunds for deposits now take 2 days.\n")
    assert s3_fingerprint(client, source) != first_fp
    second = compile_corpus(spec, workspace)
    assert second["build"]["mode"] == "incremental" and second["build"]["documents_changed"] == 1
    assert current_release(client, f"s3://{BUCKET}/trees/", "tidewell-s3") != release
    assert "New: refunds for deposits" in (workspace.artifacts("tidewell-s3") / "source" /
                                            files[0].relative_to(SAMPLE_CORPUS)).read_text()


def test_missing_s3_prefix_is_a_clear_error(s3_server, tmp_path):
    client, resource = s3_server
    from c2s_pipeline.compiler import CompileError

    spec = CorpusSpec(name="empty-s3", source=f"s3://{BUCKET}/nothing-here/", out=str(tmp_path / "out"))
    with pytest.raises(CompileError, match="documents: no documents accepted from s3://c2s-test/nothing-here/"):
        compile_corpus(spec, Workspace(tmp_path / "home"))
