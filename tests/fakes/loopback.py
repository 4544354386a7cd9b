"""What every fake HTTP server of the tests shares: a ThreadingHTTPServer on 127.0.0.1 (port 0 =
any free port) in a background thread, every request handed to the subclass's ``_serve``."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # the default backlog of 5 drops concurrent connects (a 1 s SYN retry)
    daemon_threads = True
    block_on_close = False


class LoopbackServer:
    thread_name = "fake-server"

    def __init__(self) -> None:
        self._httpd: ThreadingHTTPServer | None = None

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        raise NotImplementedError

    def start(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True
            wbufsize = -1  # headers and body leave in one write

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                server._serve(self)

            do_POST = do_DELETE = do_GET  # noqa: N815

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=self.thread_name,
                         daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"
