"""Kombu's ``filesystem://`` broker with messages that appear whole.

Kombu's filesystem channel creates a message file under its final name, then locks and writes
it; a worker polling the folder can take the file in between (it moves files without taking
the lock) and read an empty message, which kills the worker with a JSON error. Here a message
is written under a name the consumers skip (it does not end in ``.<queue>.msg``) and renamed
into place, which is atomic on one filesystem, so a consumer sees no file or the whole one.

Select it with Celery's ``broker_transport`` setting (the explicit transport wins over the URL's
scheme); runs configured by ``$C2S_CELERY_CONFIG`` with a ``filesystem://`` broker get it without
asking (``c2s_pipeline.executors``), and the workers' YAML names it the same way.
"""

from __future__ import annotations

import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

TRANSPORT = f"{__name__}:Transport"


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = os.path.join(self.data_folder_out, f".{name}.part")  # ".…" never parses as a queue's message
        try:
            with open(partial, "wb") as fh:
                fh.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
