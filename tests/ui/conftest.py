"""The explorer on a free port, served in a thread (the browser fixture is in tests/conftest.py)."""

from __future__ import annotations

import socket
import threading
import time

import pytest


@pytest.fixture
def served(explorer_db):
    """The explorer on a free 127.0.0.1 port, served by uvicorn in a thread; yields its base URL."""
    import uvicorn

    from ui.app import create_app

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(explorer_db), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(100):
        if server.started:
            break
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)
