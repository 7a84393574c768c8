"""The dashboard's check of each upstream's `/models` (issue 24, broke 2): bounded like a request (size, no
redirects, a total deadline), run in the background and shared, never awaited by the page. Each upstream here
is the raw-socket fake on 127.0.0.1, misbehaving on purpose."""

from __future__ import annotations

import socket
import threading
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator

import pytest
import requests

from tests.conftest import with_settings
from tests.fake_upstream import Received, Wire

MODELS = b'{"object": "list", "data": [{"id": "a", "object": "model"}, {"id": "b", "object": "model"}]}'


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    """Set at the end of a test: ends every trickle still going."""
    event = threading.Event()
    yield event
    event.set()


def page_until(url: str, wanted: Callable[[str], bool]) -> str:
    """The dashboard, reloaded until its upstream panel shows what the test waits for (generous deadline)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        page = requests.get(f"{url}/dashboard/", timeout=30)
        assert page.status_code == 200
        panel = page.text.partition('id="upstreams"')[2].partition("</div>")[0]
        if wanted(panel):
            return panel
        time.sleep(0.1)
    raise AssertionError(f"the upstream panel never showed it; last: {panel!r}")


def model_checks(upstream) -> list[Received]:
    return [seen for seen in upstream.received if seen.method == "GET" and seen.path.endswith("/models")]


def trickle(stop: threading.Event, sent: list[int]) -> Callable[[Received, Wire], None]:
    """A `/models` answer of 60 bytes, one a second: no read waits long enough to time out, the whole takes a
    minute."""
    def script(request: Received, wire: Wire) -> None:
        wire.send_head(200, {"Content-Type": "application/json", "Content-Length": "60"}, chunked=False)
        for _ in range(60):
            if stop.wait(1):
                return
            wire.sock.sendall(b" ")  # raises once the proxy has closed: FakeUpstream notes proxy_closed
            sent.append(1)
    return script


def test_the_page_never_waits_for_a_check_and_one_check_runs_at_a_time(upstream, serve, settings, stop):
    proxy = serve(with_settings(settings, models_timeout=30))  # the check outlives every page load here
    sent: list[int] = []
    upstream.script = trickle(stop, sent)
    panels = [requests.get(f"{proxy.url}/dashboard/", timeout=20).text for _ in range(3)]
    assert all("checking" in panel for panel in panels), "the page answers while its check trickles on"
    assert not upstream.proxy_closed and len(sent) < 60, "the check was still reading"
    assert len(model_checks(upstream)) == 1, "three pages, one check in flight"


def test_a_trickling_body_is_cut_at_the_deadline(upstream, serve, settings, stop):
    proxy = serve(with_settings(settings, models_timeout=3))  # each read may wait 3 s: none times out
    sent: list[int] = []
    upstream.script = trickle(stop, sent)
    panel = page_until(proxy.url, lambda panel: "does not answer" in panel)
    assert "time limit" in panel
    deadline = time.monotonic() + 30  # the fake learns of the close at its next write
    while not upstream.proxy_closed and time.monotonic() < deadline:
        time.sleep(0.05)
    assert upstream.proxy_closed and len(sent) < 60, "the proxy hung up before the body was over"


def test_a_gzip_bomb_is_read_no_further_than_the_cap(upstream, proxy):
    bomb = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip framing
    body = bomb.compress(b"\0" * (256 * 1024 * 1024)) + bomb.flush()  # about 256 KB on the wire

    def script(request: Received, wire: Wire) -> None:
        wire.send_raw(body, headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})

    upstream.script = script
    tracemalloc.start()
    try:
        panel = page_until(proxy.url, lambda panel: "checking" not in panel)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 * 1024 * 1024, f"{peak} bytes at the peak for a body that expands to 256 MiB"
    assert "answers" in panel and "not read further" in panel


def test_a_redirect_is_not_followed(upstream, proxy):
    elsewhere = socket.socket()
    elsewhere.bind(("127.0.0.1", 0))
    elsewhere.listen(8)
    elsewhere.settimeout(0.5)
    port = elsewhere.getsockname()[1]

    def script(request: Received, wire: Wire) -> None:
        wire.send_raw(b"", status=302, headers={"Location": f"http://127.0.0.1:{port}/v1/models"})

    upstream.script = script
    with elsewhere:
        panel = page_until(proxy.url, lambda panel: "checking" not in panel)
        with pytest.raises(TimeoutError):
            elsewhere.accept()  # nobody came: the redirect went unfollowed
    assert "does not answer" in panel and "302, a redirect" in panel


def test_a_result_is_shared_until_it_is_stale(upstream, proxy):
    upstream.script = lambda request, wire: wire.send_raw(MODELS, headers={"Content-Type": "application/json"})
    panel = page_until(proxy.url, lambda panel: "checking" not in panel)
    assert "answers (2 models)" in panel and "does not answer" not in panel
    for _ in range(3):
        requests.get(f"{proxy.url}/dashboard/", timeout=10)
    assert len(model_checks(upstream)) == 1, "pages within ten seconds share the result"


def test_under_gevent_trickling_headers_are_cut_too(upstream, start_gunicorn, stop):
    """gunicorn's gevent worker, as in production: the check runs as a greenlet, and the total deadline holds
    while headers trickle, where no read ever waits long enough to time out."""
    server = start_gunicorn({"TOOLPROXY_UPSTREAM": upstream.url, "TOOLPROXY_MODELS_TIMEOUT": "3"}).wait_ready()
    sent: list[int] = []

    def script(request: Received, wire: Wire) -> None:
        wire.sock.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        for _ in range(60):
            if stop.wait(1):
                return
            wire.sock.sendall(b"a")
            sent.append(1)

    upstream.script = script
    first = requests.get(f"{server.url}/dashboard/", timeout=20).text
    assert "checking" in first and not upstream.proxy_closed
    panel = page_until(server.url, lambda panel: "does not answer" in panel)
    assert "time limit" in panel and len(sent) < 60
