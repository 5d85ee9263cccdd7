"""``mosaic gui``: the main window on a qasync event loop (gRPC streams and Qt share one thread)."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path


def main(home: Path) -> int:
    import qasync
    from PySide6.QtWidgets import QApplication

    from mosaic.clients.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("MOSAIC")
    app.setQuitOnLastWindowClosed(False)  # the session below ends the loop, after closing its streams
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    window = MainWindow(home)
    window.show()
    # Ctrl-C and SIGTERM close the window; the timer gives Python a turn to run its signal handlers.
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: window.close())
    from PySide6.QtCore import QTimer

    wake = QTimer()
    wake.timeout.connect(lambda: None)
    wake.start(200)

    async def session() -> None:
        try:
            await window.start()
        except Exception as exc:  # noqa: BLE001  (shown, then the window stays for the user to read)
            window.statusBar().showMessage(f"cannot start: {exc}")
            window.daemon_label.setText(str(exc))
        await window.closed
        await window.stop()

    with loop:
        loop.run_until_complete(session())
    return 0
