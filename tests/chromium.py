"""Drive Debian's headless Chromium over the DevTools protocol (a local WebSocket).

One browser per test module; each tab is a target attached with a flat
session, and ``Tab.eval`` runs JavaScript in it. Nothing is downloaded: the
browser is the system's ``chromium`` (tools/bootstrap.sh installs it).
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, width: int = 1280, height: int = 900):
        from websockets.sync.client import connect

        exe = find_chromium()
        if exe is None:
            raise RuntimeError("no chromium on PATH (apt-get install chromium)")
        # Chromium's helper processes (crashpad, the zygote) may still write into the profile for a
        # moment after the browser exits: removing it then must not fail the test that used it
        self._profile = tempfile.TemporaryDirectory(prefix="caliper-chromium-", ignore_cleanup_errors=True)
        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--disable-background-networking", "--disable-dev-shm-usage",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
             f"--user-data-dir={self._profile.name}", f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = Path(self._profile.name) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("headless chromium did not start")
            time.sleep(0.05)
        port, path = port_file.read_text().splitlines()[:2]
        self.ws = connect(f"ws://127.0.0.1:{port}{path}", max_size=1 << 26).__enter__()
        self._id = 0

    def call(self, method: str, session: str | None = None, **params) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            reply = json.loads(self.ws.recv(timeout=30))
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
        raise TimeoutError(method)

    def open(self, url: str) -> Tab:
        target = self.call("Target.createTarget", url=url)["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        return Tab(self, target, session)

    def close(self) -> None:
        ws = getattr(self, "ws", None)
        if ws is not None:
            ws.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for _ in range(20):  # give the helpers a moment; what they leave is removed at the last try
            shutil.rmtree(self._profile.name, ignore_errors=True)
            if not Path(self._profile.name).exists():
                break
            time.sleep(0.1)
        self._profile.cleanup()


class Tab:
    def __init__(self, browser: Browser, target: str, session: str):
        self.browser, self.target, self.session = browser, target, session

    def eval(self, expression: str):
        result = self.browser.call("Runtime.evaluate", self.session, expression=expression,
                                   returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 20.0):
        deadline = time.monotonic() + timeout
        guarded = f"(() => {{ try {{ return ({expression}); }} catch (e) {{ return false; }} }})()"
        while time.monotonic() < deadline:  # false while the page is still loading
            value = self.eval(guarded)
            if value:
                return value
            time.sleep(0.05)
        raise TimeoutError(f"{expression} stayed false for {timeout} s")

    def canvas_png(self) -> bytes:
        """The page's frame canvas as PNG bytes (what the page drew, pixel for pixel)."""
        url = self.eval("document.getElementById('frame').toDataURL('image/png')")
        return base64.b64decode(url.split(",", 1)[1])

    def screenshot(self) -> bytes:
        return base64.b64decode(self.browser.call("Page.captureScreenshot", self.session,
                                                  format="png")["data"])

    def close(self) -> None:
        self.browser.call("Target.closeTarget", targetId=self.target)
