"""A live session in a browser tab: :class:`WebSink` over :class:`caliper_vk.web.FrameServer`.

``Session(window="web")`` serves its frames at a URL with a random token
(printed when the session starts; ``session.url``). Frames are read back only
while a tab is connected; the server keeps the latest one and each tab gets
the newest frame it can take, so training never waits for a browser.
"""

from __future__ import annotations

from ...web import FrameServer


class WebSink:
    """Frames to browser tabs; their drag, wheel and keys back to the session."""

    kind = "web"
    live = True

    def __init__(self, title: str = "Caliper", host: str = "127.0.0.1", port: int = 8765, **options):
        self.server = FrameServer(title=title, host=host, port=port, **options)

    @property
    def url(self) -> str:
        return self.server.url

    def wants_frame(self) -> bool:
        return self.server.wants_frame()

    def deliver(self, rgba, step: int, status: str) -> None:
        self.server.publish(rgba, step=int(step), status=status)

    def events(self):
        return self.server.events()

    def set_status(self, text: str) -> None:
        self.server.set_status(text)

    def close(self) -> None:
        self.server.close()
