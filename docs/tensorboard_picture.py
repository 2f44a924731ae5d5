"""Render ``docs/tensorboard-trainer.png``: TensorBoard's scalars page for a training run's log folder.

The README's picture comes from the Trainer callback test's own run::

    python -m pytest tests/integrations/test_integrations_trainer.py -k every_save --basetemp=/tmp/novelty-bt
    python docs/tensorboard_picture.py /tmp/novelty-bt/test_every_save_is_gated_and_l0/out/runs

It serves the folder with ``tensorboard`` on 127.0.0.1 and takes a screenshot with headless
Chromium (Debian's ``chromium`` package; neither is a dependency of the project).
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

TAGS = "train/loss|story/quality|story/originality@4|novelty/passed"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logdir", type=Path)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("tensorboard-trainer.png"))
    args = parser.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("needs headless Chromium (apt-get install chromium)", file=sys.stderr)
        return 2
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", str(args.logdir),
                               "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        for _ in range(60):  # up to 30 s for the server to answer
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/data/plugins_listing", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        url = f"http://127.0.0.1:{port}/#scalars&tagFilter={urllib.request.quote(TAGS, safe='')}&_smoothingWeight=0"
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--window-size=1100,760", "--virtual-time-budget=30000",
                        "--run-all-compositor-stages-before-draw", f"--screenshot={args.out}", url],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)  # fmt: skip
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
