"""A real dagster-webserver on 127.0.0.1 serving the c2s code location, for the UI tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def dagster_webserver(home: Path):
    """Serve workspace.yaml against the instance in ``home``; yields the base URL."""
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    log_path = home / "webserver.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dagster_webserver", "-w", str(ROOT / "workspace.yaml"), "-h", "127.0.0.1",
             "-p", str(port)], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                assert proc.poll() is None, log_path.read_text()[-3000:]
                try:
                    if httpx.get(f"{base}/server_info", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.5)
            else:
                pytest.fail("dagster-webserver did not come up within 120 s")
            yield base
        finally:
            proc.terminate()
            proc.wait(timeout=30)
