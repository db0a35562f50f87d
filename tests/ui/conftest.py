"""A served explorer and a headless system Chromium (Debian's chromium + chromium-driver)."""

from __future__ import annotations

import shutil
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


@pytest.fixture
def browser():
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.skip("no system Chromium: apt-get install chromium chromium-driver (.ci/run does)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()
