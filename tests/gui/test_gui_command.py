"""`mosaic gui` as a user starts it: it starts a daemon for the home, and ends on Ctrl-C / SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from mosaic.host.daemon.endpoint import find_daemon
from mosaic.clients.gui.drive import stop_daemon
from mosaic.testing import wait_until


def test_mosaic_gui_starts_a_daemon_for_its_home_and_ends_on_sigterm(tmp_path):
    home = tmp_path / "home"
    env = {**os.environ, "MOSAIC_HOME": str(home), "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.Popen([sys.executable, "-m", "mosaic", "gui"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        endpoint = wait_until(lambda: find_daemon(home), 120, "the daemon the GUI starts", interval=0.1, proc=proc)
        assert endpoint.pid != proc.pid
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, proc.stderr.read()[-2000:]
        assert find_daemon(home) is not None  # the daemon keeps serving the home, as the window said
    finally:
        if proc.poll() is None:
            proc.kill()
        stop_daemon(home)


def test_without_the_gui_extra_it_says_what_to_install():
    code = ("import sys\nsys.modules['PySide6'] = None\nfrom mosaic.clients.cli import main\nsys.exit(main(['gui']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("mosaic: error: the GUI needs the 'gui' extra (PySide6 missing)")
    assert len(proc.stderr.strip().splitlines()) == 1
