"""``python -m c2s_cli ...``: the ``c2s`` command without its console script."""

from .main import main

main()
