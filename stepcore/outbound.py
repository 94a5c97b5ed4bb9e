"""Requests Steplab sends to addresses its users give it (webhook receivers now, served-model endpoints next):
they cannot be aimed inside the network nor hold a worker.

One URL is parsed once, by the parser that connects (urllib3's), and refused when Python's ``urlsplit`` reads
another host from it, or when it carries userinfo, a backslash, a control character, a space or a non-http(s)
scheme. Its host is resolved once; every address must be public (not private, loopback, link-local, multicast,
reserved or unspecified) unless the use's allow-list admits it (a host name, or a CIDR holding the address), and
the request connects to the address that was checked: no second lookup between the check and the connection
(DNS rebinding). Redirects are never followed. One request has a total deadline (a watchdog shuts the socket
down, so a receiver trickling a byte a second is cut off at it, headers included) and reads at most
``max_answer_bytes`` of the answer. Messages are short and safe to show to the user who gave the URL: they
never say what a name resolves to, nor carry the answer of a receiver that is not public.

This module imports no app: webhooks and the model endpoints each hold their own ``Rules``.
"""
from __future__ import annotations

import contextlib
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.client import HTTPException
from urllib.parse import urlsplit

import certifi
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import ConnectTimeoutError, HTTPError, LocationParseError, NewConnectionError
from urllib3.util import parse_url

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

MAX_URL_LENGTH = 2000
#: How much of a public receiver's answer a message quotes.
QUOTED_CHARACTERS = 120


class OutboundRefused(ValueError):
    """The URL or the address it leads to is refused; the message is short and safe to show."""


class OutboundFailed(Exception):
    """The request went out and got no usable answer (connection, TLS, deadline); the message is short."""


@dataclass(frozen=True)
class Rules:
    """One use's rules: what it admits besides public addresses, and what one request may cost."""

    allowed: tuple[str, ...]  # host names, IP addresses or CIDRs admitted although not public
    deadline_s: float  # the whole request: connect, send, headers and body
    max_answer_bytes: int
    setting: str  # the setting that holds ``allowed``, named in messages
    ca_certs: str | None = None  # the CA bundle TLS trusts (a private CA's file); None: certifi's public bundle

    def allowed_names(self) -> frozenset[str]:
        return frozenset(_name(entry) for entry in self.allowed if _network(entry) is None)

    def allowed_networks(self) -> tuple[IPNetwork, ...]:
        return tuple(net for net in (_network(entry) for entry in self.allowed) if net is not None)


@dataclass(frozen=True)
class Target:
    """A checked URL: where the request goes (``address``, resolved once) and what it says it goes to."""

    scheme: str
    host: str  # as written, lower case, without brackets
    port: int
    request_uri: str
    address: str
    public: bool  # every address the host resolved to is public (not admitted only by the allow-list)

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes  # at most the rules' ``max_answer_bytes``
    truncated: bool  # the receiver sent more than that; the rest was not read
    public: bool
    headers: Mapping[str, str] = field(default_factory=dict)  # names in lower case

    def summary(self) -> str:
        """``HTTP <code>``, and a short printable quote of the body only for a public receiver."""
        text = f"HTTP {self.status}"
        if 300 <= self.status < 400:
            text += " (redirects are not followed)"
        if self.public and self.body:
            quote = "".join(c if c.isprintable() else " " for c in self.body.decode("utf-8", "replace"))
            quote = " ".join(quote.split())
            if quote:
                text += f": {quote[:QUOTED_CHARACTERS]}"
        return text


def _name(host: str) -> str:
    return host.strip().lower().rstrip(".")


def _network(entry: str) -> IPNetwork | None:
    try:
        return ipaddress.ip_network(entry.strip().strip("[]"), strict=False)
    except ValueError:
        return None


def _unwrapped(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, Teredo): it is where the packets end up."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.sixtofour is not None:
            return ip.sixtofour
        if ip.teredo is not None:
            return ip.teredo[1]
    return ip


def is_public(ip: IPAddress) -> bool:
    ip = _unwrapped(ip)
    return ip.is_global and not (ip.is_multicast or ip.is_reserved or ip.is_unspecified or ip.is_loopback
                                 or ip.is_link_local or ip.is_private)


@dataclass(frozen=True)
class _Parts:
    scheme: str
    host: str
    port: int
    request_uri: str


def parse(url: str) -> _Parts:
    """The URL's parts as the connection reads them, or ``OutboundRefused`` naming what is wrong."""
    if not isinstance(url, str) or not url:
        raise OutboundRefused("The URL is empty.")
    if len(url) > MAX_URL_LENGTH:
        raise OutboundRefused(f"The URL is longer than {MAX_URL_LENGTH} characters.")
    if any(ord(c) <= 0x20 or ord(c) >= 0x7F for c in url):
        raise OutboundRefused("The URL contains a space, a control character or a non-ASCII character "
                              "(percent-encode it; write an international host name in its xn-- form).")
    if "\\" in url:
        raise OutboundRefused("The URL contains a backslash.")
    try:
        parsed = parse_url(url)
        split = urlsplit(url)
        split_port = split.port
    except (LocationParseError, ValueError):
        raise OutboundRefused("The URL cannot be parsed.") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise OutboundRefused("The URL is not an http(s) URL with a host.")
    if parsed.auth is not None or "@" in split.netloc:
        raise OutboundRefused("The URL carries a user name or password (user@host): put credentials elsewhere.")
    host = _name(parsed.host.strip("[]"))
    if not host or (split.hostname or "").rstrip(".") != host or split_port != parsed.port:
        raise OutboundRefused("The URL's host is ambiguous (parsers read different hosts from it).")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    if not 0 < port < 65536:
        raise OutboundRefused("The URL's port is out of range.")
    return _Parts(scheme=parsed.scheme, host=host, port=port, request_uri=parsed.request_uri)


def _resolve(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise OutboundRefused(f"The host {host!r} does not resolve.") from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def check_url(url: str, *, rules: Rules) -> Target:
    """Parse, resolve once and check ``url``; the target connects to the address checked here."""
    parts = parse(url)
    addresses = _resolve(parts.host, parts.port)
    if not addresses:
        raise OutboundRefused(f"The host {parts.host!r} does not resolve.")
    public = _check_addresses(parts.host, addresses, rules)
    return Target(scheme=parts.scheme, host=parts.host, port=parts.port, request_uri=parts.request_uri,
                  address=addresses[0], public=public)


def _check_addresses(host: str, addresses: list[str], rules: Rules) -> bool:
    """Refuse any address neither public nor admitted; True when all are public."""
    named = host in rules.allowed_names()
    networks = rules.allowed_networks()
    public = True
    for address in addresses:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        if is_public(ip):
            continue
        public = False
        if not (named or any(_unwrapped(ip) in net or ip in net for net in networks)):
            raise OutboundRefused(f"The host {host!r} is on a private, loopback or link-local address: the "
                                  f"receiver must be public (or admitted by {rules.setting}).")
    return public


def refusal(url: str, *, rules: Rules, resolve: bool = True) -> str:
    """Why ``url`` is refused ("" when it is not); without ``resolve`` only the URL and an address written in
    it are judged (no DNS: a migration or a startup check must not depend on it)."""
    try:
        if resolve:
            check_url(url, rules=rules)
        else:
            parts = parse(url)
            if _network(parts.host) is not None and "/" not in parts.host:
                _check_addresses(parts.host, [parts.host], rules)
    except OutboundRefused as refused:
        return str(refused)
    return ""


def _connection(target: Target, rules: Rules) -> HTTPConnection:
    if target.scheme == "https":
        # TLS speaks to the name (SNI, certificate check) over the connection to the checked address.
        return HTTPSConnection(target.address, target.port, timeout=rules.deadline_s, server_hostname=target.host,
                               cert_reqs="CERT_REQUIRED", ca_certs=rules.ca_certs or certifi.where())
    return HTTPConnection(target.address, target.port, timeout=rules.deadline_s)


def _failure(error: BaseException) -> str:
    """A fixed sentence per kind of failure: an exception's own text names addresses and ports."""
    if isinstance(error, NewConnectionError | ConnectTimeoutError) and error.__cause__ is not None:
        return _failure(error.__cause__)
    if isinstance(error, ConnectTimeoutError):
        return "The receiver did not accept the connection in time."
    if isinstance(error, ConnectionRefusedError):
        return "The receiver refused the connection."
    if isinstance(error, ssl.SSLCertVerificationError):
        return "The receiver's TLS certificate is not valid for its host."
    if isinstance(error, ssl.SSLError):
        return "The TLS handshake with the receiver failed."
    if isinstance(error, TimeoutError | socket.timeout):
        return "The receiver did not answer in time."
    if isinstance(error, HTTPException | HTTPError):
        return "The receiver's answer is not valid HTTP."
    return f"The connection to the receiver failed ({type(error).__name__})."


def post(target: Target, *, body: bytes, headers: Mapping[str, str], rules: Rules) -> Answer:
    """POST ``body`` to the checked target: at most ``rules.deadline_s`` in all and ``rules.max_answer_bytes``
    read; no redirect followed. ``OutboundFailed`` when no answer came."""
    return send(target, method="POST", body=body, headers=headers, rules=rules)


def get(target: Target, *, headers: Mapping[str, str], rules: Rules) -> Answer:
    """GET the checked target under the same deadline, answer limit and no-redirect rule as ``post``."""
    return send(target, method="GET", body=None, headers=headers, rules=rules)


def send(target: Target, *, method: str, body: bytes | None, headers: Mapping[str, str], rules: Rules) -> Answer:
    """One request to the checked target (``post`` and ``get`` name the method)."""
    conn = _connection(target, rules)
    expired = threading.Event()

    def cut() -> None:
        expired.set()
        sock = conn.sock
        if sock is not None:
            # The plain socket's shutdown, also under TLS: it ends any read blocked in another thread.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    watchdog = threading.Timer(rules.deadline_s, cut)
    watchdog.daemon = True
    started = time.monotonic()
    watchdog.start()
    try:
        conn.connect()
        if expired.is_set():  # the watchdog fired while there was no socket yet to shut down
            raise TimeoutError
        conn.request(method, target.request_uri, body=body, headers={**headers, "Host": target.host_header},
                     preload_content=False, decode_content=False)
        response = conn.getresponse()
        chunks: list[bytes] = []
        size = 0
        while size <= rules.max_answer_bytes:
            chunk = response.read(min(65536, rules.max_answer_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if expired.is_set():
            raise TimeoutError
        data = b"".join(chunks)
        return Answer(status=response.status, body=data[:rules.max_answer_bytes],
                      truncated=size > rules.max_answer_bytes, public=target.public,
                      headers={name.lower(): value for name, value in response.headers.items()})
    except (OSError, HTTPException, HTTPError) as error:
        if expired.is_set() or time.monotonic() - started >= rules.deadline_s:
            raise OutboundFailed(f"No complete answer within the deadline of {rules.deadline_s:g} s.") from None
        raise OutboundFailed(_failure(error)) from None
    finally:
        watchdog.cancel()
        conn.close()


def allowed_from(entries: Iterable[str]) -> tuple[str, ...]:
    """A setting's comma-separated entries, blanks dropped."""
    return tuple(entry.strip() for entry in entries if entry.strip())
