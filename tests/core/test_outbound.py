"""Requests to URLs users name: only public addresses unless allowed, checked after resolving,
sent to the checked address, redirects not followed. Against a real local HTTP server."""

import ipaddress
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from core.outbound import OutboundRefused, address_allowed, post, resolve_checked, url_problem


@pytest.mark.parametrize(
    ("address", "public", "private_allowed"),
    [
        ("93.184.215.14", True, True),
        ("2606:4700::1111", True, True),
        ("127.0.0.1", False, True),
        ("::1", False, True),
        ("::ffff:127.0.0.1", False, True),
        ("10.0.0.1", False, True),
        ("172.16.5.4", False, True),
        ("192.168.0.10", False, True),
        ("fd00::1", False, True),
        ("100.64.0.1", False, False),  # carrier-grade NAT: neither public nor private
        ("169.254.169.254", False, False),  # cloud metadata: never
        ("fe80::1", False, False),
        ("224.0.0.1", False, False),
        ("0.0.0.0", False, False),  # noqa: S104 - an address refused, not one bound
    ],
)
def test_which_addresses_a_request_may_go_to(address, public, private_allowed):
    ip = ipaddress.ip_address(address)
    assert address_allowed(ip, allow_private=False) is public
    assert address_allowed(ip, allow_private=True) is private_allowed


def test_a_url_is_checked_without_resolving_its_name():
    assert url_problem("https://hooks.example.com/x?y=1", allow_private=False) is None
    assert url_problem("https://no-such-host.invalid/x", allow_private=False) is None
    assert "loopback" in url_problem("http://LOCALHOST./x", allow_private=False)
    assert url_problem("http://localhost/x", allow_private=True) is None


def test_a_name_is_checked_after_it_is_resolved():
    with pytest.raises(OutboundRefused, match=r"resolves to (127\.0\.0\.1|::1)"):
        resolve_checked("localhost", 80, allow_private=False)
    assert resolve_checked("localhost", 80, allow_private=True) in ("127.0.0.1", "::1")
    with pytest.raises(OutboundRefused, match="does not resolve"):
        resolve_checked("no-such-host.invalid", 80, allow_private=True)


class _Server:
    def __init__(self, status: int, location: str = "") -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append((self.path, dict(self.headers.items()), body))
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                reply = b"x" * 5000
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_port
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_post_reaches_the_checked_address_with_the_hosts_name():
    server = _Server(204)
    try:
        url = f"http://localhost:{server.port}/in?via=test"
        answer = post(url, b'{"a":1}', {"X-Test": "1"}, timeout_s=5, allow_private=True)
    finally:
        server.close()
    assert answer.status == 204
    ((path, headers, body),) = server.requests
    assert (path, body) == ("/in?via=test", b'{"a":1}')
    assert headers["Host"] == f"localhost:{server.port}"
    assert headers["Content-Type"] == "application/json" and headers["X-Test"] == "1"


def test_a_redirect_is_an_answer_not_followed_and_a_long_body_is_not_read_whole():
    target = _Server(200)
    redirecting = _Server(302, location=f"http://127.0.0.1:{target.port}/elsewhere")
    try:
        url = f"http://127.0.0.1:{redirecting.port}/"
        answer = post(url, b"{}", {}, timeout_s=5, allow_private=True)
    finally:
        redirecting.close()
        target.close()
    assert answer.status == 302 and target.requests == []
    assert len(answer.excerpt) == 512


def test_nothing_is_sent_to_loopback_unless_allowed():
    server = _Server(200)
    try:
        for url in (f"http://127.0.0.1:{server.port}/", f"http://localhost:{server.port}/"):
            with pytest.raises(OutboundRefused):
                post(url, b"{}", {}, timeout_s=5, allow_private=False)
    finally:
        server.close()
    assert server.requests == []
