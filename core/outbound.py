"""Requests the hub sends to URLs its users name (completion webhooks), kept off the hub's own
network: no loopback, private, link-local or otherwise non-public address unless an admin
allows private ones (server-side request forgery).

A URL is checked twice. When it is given (`url_problem`): its form, and a literal address or a
local name is refused at once, as a field error. Before every request (`post`): its name is
resolved again, since DNS may answer differently by then (rebinding), every address it resolves
to must pass, and the request is sent to the address that was checked, never to a second
resolution. Redirects are not followed: a 3xx is an answer like any other.
"""

import http.client
import ipaddress
import socket
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_URL_LENGTH = 2000
# Of an answer's body, what is kept for the record; the rest is never read.
EXCERPT_BYTES = 512
USER_AGENT = "ComputePool-Webhooks/1"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class OutboundRefused(Exception):
    """The URL leads somewhere the hub does not send to."""


def address_allowed(address: IPAddress, *, allow_private: bool) -> bool:
    """Public unicast addresses only; with `allow_private`, loopback and private ones too.
    Link-local (169.254.0.0/16, where clouds serve instance credentials), multicast and
    unspecified addresses are refused whatever the setting."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    if address.is_link_local or address.is_multicast or address.is_unspecified:
        return False
    return address.is_global or (allow_private and (address.is_private or address.is_loopback))


def _is_local_name(host: str) -> bool:
    name = host.rstrip(".").lower()
    return name == "localhost" or name.endswith(".localhost")


def url_problem(url: str, *, allow_private: bool) -> str | None:
    """What is wrong with `url` as a destination, without resolving its name; None if nothing.
    A name is resolved, and checked again, before each request (`post`)."""
    if len(url) > MAX_URL_LENGTH:
        return f"at most {MAX_URL_LENGTH} characters"
    if not url.isascii() or any(c.isspace() or not c.isprintable() for c in url):
        # What is sent is the URL as given: a name in punycode, a path percent-encoded.
        return "must be ASCII, without spaces or control characters (encode them)"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"not a valid URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return "must be an http:// or https:// URL"
    if not parts.hostname:
        return "must name a host"
    if parts.username is not None or parts.password is not None:
        return "must not carry credentials"
    if port == 0:
        return "port 0 is not a port"
    try:
        address = ipaddress.ip_address(parts.hostname)
    except ValueError:
        if _is_local_name(parts.hostname) and not allow_private:
            return "must not point at this machine (loopback)"
        return None
    if not address_allowed(address, allow_private=allow_private):
        return f"must not point at a private, loopback or reserved address ({address})"
    return None


def resolve_checked(host: str, port: int, *, allow_private: bool) -> str:
    """The address to connect to: `host` resolved now, every address it has allowed."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise OutboundRefused(f"{host} does not resolve ({exc})") from None
    addresses = [str(info[4][0]) for info in infos]
    for text in addresses:
        # A name with one refused address among allowed ones is refused whole: which one a
        # resolver answers first is not ours to choose. (An IPv6 address may carry a %zone.)
        address = ipaddress.ip_address(text.split("%", 1)[0])
        if not address_allowed(address, allow_private=allow_private):
            raise OutboundRefused(
                f"{host} resolves to {text}, a private, loopback or reserved address"
            )
    if not addresses:
        raise OutboundRefused(f"{host} has no address")
    return addresses[0]


class _PinnedHTTP(http.client.HTTPConnection):
    """Connects to the checked address; the Host header still names the host."""

    def __init__(self, host: str, port: int, *, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """Connects to the checked address; TLS verifies the certificate against the host's name."""

    def __init__(self, host: str, port: int, *, address: str, timeout: float) -> None:
        self.tls = ssl.create_default_context()
        super().__init__(host, port, timeout=timeout, context=self.tls)
        self.address = address

    def connect(self) -> None:
        raw = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = self.tls.wrap_socket(raw, server_hostname=self.host)


@dataclass(frozen=True)
class Answer:
    status: int
    excerpt: str  # the first EXCERPT_BYTES of the body
    duration_ms: int


def post(
    url: str, body: bytes, headers: dict[str, str], *, timeout_s: float, allow_private: bool
) -> Answer:
    """POST `body` to `url` once. OutboundRefused: the URL leads somewhere refused (nothing is
    sent); OSError (http.client's errors included): the request did not get an answer.
    `timeout_s` bounds the connection and each read."""
    problem = url_problem(url, allow_private=allow_private)
    if problem:
        raise OutboundRefused(f"{url}: {problem}")
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    started = time.monotonic()
    address = resolve_checked(host, port, allow_private=allow_private)
    kind = _PinnedHTTPS if parts.scheme == "https" else _PinnedHTTP
    connection = kind(host, port, address=address, timeout=timeout_s)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        connection.request(
            "POST",
            target,
            body=body,
            headers={"Content-Type": "application/json", "User-Agent": USER_AGENT, **headers},
        )
        response = connection.getresponse()
        excerpt = response.read(EXCERPT_BYTES).decode("utf-8", errors="replace")
    except http.client.HTTPException as exc:
        raise OSError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        connection.close()
    return Answer(response.status, excerpt, int((time.monotonic() - started) * 1000))
