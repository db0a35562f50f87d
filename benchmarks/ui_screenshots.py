"""Screenshots of the explorer's main pages, taken by headless system Chromium, for docs/ui/.

xz -dkc reports/dbbench-main/rows.db.xz > /tmp/rows.db
.venv/bin/python benchmarks/ui_screenshots.py --database-url sqlite:////tmp/rows.db [--out docs/ui]
"""

from __future__ import annotations

import argparse
import re
import shutil
import socket
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import uvicorn  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402

from ui.app import create_app  # noqa: E402


def serve(url: str) -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(url), host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--out", default="docs/ui")
    args = parser.parse_args()
    base = serve(args.database_url)
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def shot(name: str, path: str) -> str:
        driver.get(base + path)
        driver.save_screenshot(str(out / f"{name}.png"))
        print(f"{out / name}.png  <- {path}")
        return driver.page_source

    runs = shot("runs", "/?kind=train")
    run = next(r for r in re.findall(r'href="/runs/([^"]+)"', runs) if "harness_s" in r)
    page = shot("training-run", f"/runs/{run}")
    rescued = None  # the first dead group whose rescue succeeded at least once
    for step in re.findall(rf'href="/runs/{re.escape(run)}/updates/(\d+)"', page):
        driver.get(f"{base}/runs/{run}/updates/{step}")
        for row in re.findall(r"<tr class=\"dead-row\">(.*?)</tr>", driver.page_source, re.DOTALL):
            pair = re.search(r'href="(/compare\?[^"]+)"', row)
            if pair and re.search(r'class="alive">[1-9]', row):
                rescued = (step, pair.group(1).replace("&amp;", "&"))
                break
        if rescued:
            break
    if rescued:
        shot("update", f"/runs/{run}/updates/{rescued[0]}")
        shot("dead-group-beside-its-rescue", rescued[1])
    shot("search", "/search?failure_kind=wrong_answer")
    driver.quit()


if __name__ == "__main__":
    main()
