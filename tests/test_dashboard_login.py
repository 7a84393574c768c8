"""The dashboard's sign-in under attack (issue 24, broke 3): wrong keys are limited per address and in total with
a growing wait, logged and counted; a post without its own session's token signs nobody in."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from requests.adapters import HTTPAdapter
from werkzeug.serving import make_server

from tests.conftest import ProxyServer, with_settings
from tests.test_dashboard import sign_in
from toolproxy import create_app
from toolproxy.web import attempts
from toolproxy.web.attempts import LoginAttempts

KEY = "sk-dash-key"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FromAddress(HTTPAdapter):
    """Connects from another loopback address (127.0.0.0/8 is all this machine's), as another client would."""

    def __init__(self, address: str) -> None:
        self._address = address
        super().__init__()

    def init_poolmanager(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        kwargs["source_address"] = (self._address, 0)
        super().init_poolmanager(*args, **kwargs)


def browser(address: str = "127.0.0.1") -> requests.Session:
    session = requests.Session()
    session.mount("http://", FromAddress(address))
    return session


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def guarded(settings, clock: Clock) -> Iterator[ProxyServer]:
    """The app with keys, its login attempts on a clock the test moves."""
    app = create_app(with_settings(settings, api_keys=(KEY,)))
    app.extensions["toolproxy.login_attempts"] = LoginAttempts(clock=clock)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield ProxyServer(f"http://127.0.0.1:{server.server_port}")
    server.shutdown()


def logins(url: str) -> dict[str, float]:
    text = requests.get(f"{url}/metrics", headers={"Authorization": f"Bearer {KEY}"}, timeout=10).text
    return {sample.labels["outcome"]: sample.value for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name == "toolproxy_dashboard_logins_total"}


def is_signed_in(session: requests.Session, url: str) -> bool:
    return session.get(f"{url}/dashboard/records.json", timeout=10).status_code == 200


def test_a_flood_of_wrong_keys_is_mostly_refused_unheard(upstream, serve, settings):
    proxy = serve(with_settings(settings, api_keys=(KEY,)))
    session = requests.Session()
    statuses = [sign_in(session, proxy.url, f"wrong-{n}").status_code for n in range(30)]
    heard = statuses.count(403)
    # 5 are free, then each failure doubles the wait: even a machine that takes a minute for these 30 posts
    # hears no more than 5 + 7 of them.
    assert 5 <= heard <= 12 and statuses.count(429) == 30 - heard, statuses
    assert statuses[:5] == [403] * 5


def test_the_wait_grows_per_address_and_refuses_even_the_right_key(guarded, clock, caplog):
    caplog.set_level(logging.WARNING, logger="toolproxy.dashboard")
    session = browser()
    assert [sign_in(session, guarded.url, "wrong").status_code for _ in range(6)] == [403] * 6
    refused = sign_in(session, guarded.url, KEY)
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "1" and "try again" in refused.text
    assert not is_signed_in(session, guarded.url)
    clock.now += 1
    assert sign_in(session, guarded.url, "wrong").status_code == 403
    assert sign_in(session, guarded.url, KEY).headers["Retry-After"] == "2", "each failure doubles the wait"
    other = browser("127.0.0.2")
    sign_in(other, guarded.url, KEY)
    assert is_signed_in(other, guarded.url), "another address is not held by this one's failures"
    clock.now += 2
    sign_in(session, guarded.url, KEY)
    assert is_signed_in(session, guarded.url)
    assert logins(guarded.url) == {"wrong_key": 7, "refused": 2, "success": 2}
    lines = [record.getMessage() for record in caplog.records if "dashboard login" in record.getMessage()]
    assert len(lines) == 7 and all("from 127.0.0.1: wrong key" in line for line in lines), lines
    assert "refused for 1 s" in lines[5] and "refused for 2 s" in lines[6] and KEY not in caplog.text


def test_many_addresses_together_wait_too(guarded, clock):
    for n in range(attempts.FREE_IN_TOTAL // attempts.FREE_PER_ADDRESS):
        session = browser(f"127.0.1.{n + 1}")
        assert [sign_in(session, guarded.url, "wrong").status_code
                for _ in range(attempts.FREE_PER_ADDRESS)] == [403] * attempts.FREE_PER_ADDRESS
    last = browser("127.0.2.1")
    assert sign_in(last, guarded.url, "wrong").status_code == 403  # one past the total: the wait begins
    fresh = browser("127.0.2.2")
    assert sign_in(fresh, guarded.url, KEY).status_code == 429, "a new address waits with the rest"
    clock.now += 1
    sign_in(fresh, guarded.url, KEY)
    assert is_signed_in(fresh, guarded.url)


def test_a_post_without_the_forms_token_signs_nobody_in(upstream, serve, settings):
    proxy = serve(with_settings(settings, api_keys=(KEY,)))
    cross_site = requests.Session()  # another site's page: a plain form post, no cookie, no token
    answer = cross_site.post(f"{proxy.url}/dashboard/login", data={"key": KEY}, timeout=10, allow_redirects=False)
    assert answer.status_code == 400 and "sign in again" in answer.text
    assert not is_signed_in(cross_site, proxy.url)
    victim = requests.Session()
    victim.get(f"{proxy.url}/dashboard/login", timeout=10)  # the browser has a session, with its own token
    answer = victim.post(f"{proxy.url}/dashboard/login", data={"key": KEY}, timeout=10, allow_redirects=False)
    assert answer.status_code == 400 and not is_signed_in(victim, proxy.url)
    assert logins(proxy.url) == {"bad_token": 2}


def test_another_sessions_token_does_not_sign_in(upstream, serve, settings):
    proxy = serve(with_settings(settings, api_keys=(KEY,)))
    attacker = requests.Session()
    form = attacker.get(f"{proxy.url}/dashboard/login", timeout=10).text
    token = re.search(r'name="csrf" value="([^"]+)"', form).group(1)
    victim = requests.Session()
    victim.get(f"{proxy.url}/dashboard/login", timeout=10)
    answer = victim.post(f"{proxy.url}/dashboard/login", data={"key": KEY, "csrf": token}, timeout=10,
                         allow_redirects=False)
    assert answer.status_code == 400 and not is_signed_in(victim, proxy.url)
    assert sign_in(victim, proxy.url, KEY).ok and is_signed_in(victim, proxy.url), "its own token works"


def test_waits_double_up_to_a_limit_and_are_forgotten():
    clock = Clock()
    guard = LoginAttempts(clock=clock)
    waits = [guard.failed("a") for _ in range(16)]
    assert waits[:5] == [0.0] * 5
    assert waits[5:10] == [1.0, 2.0, 4.0, 8.0, 16.0] and waits[-1] == attempts.LONGEST_WAIT
    assert guard.wait("a") == attempts.LONGEST_WAIT and guard.wait("b") == 0.0
    clock.now += attempts.LONGEST_WAIT
    assert guard.wait("a") == 0.0
    assert guard.failed("a") == attempts.LONGEST_WAIT, "failing again soon: the wait stays long"
    clock.now += attempts.FORGET_AFTER + attempts.LONGEST_WAIT + 1
    assert guard.failed("a") == 0.0, "a quarter of an hour without failing: afresh"
    guard.succeeded("a")
    assert [guard.failed("a") for _ in range(6)][-1] == 1.0, "a right key clears the count"


def test_addresses_are_bounded():
    guard = LoginAttempts(clock=Clock())
    for n in range(attempts.MAX_ADDRESSES + 100):
        guard.failed(f"10.0.{n // 256}.{n % 256}")
    assert len(guard._by_address) == attempts.MAX_ADDRESSES
