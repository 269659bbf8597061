"""Client addresses (a request's REMOTE_ADDR) read in one place, for the keys that group
clients: the download counter's networks (counts.network) and the failure limit's clients
(web/ratelimit.py). One address written several ways (2001:DB8::1, 2001:db8:0:0::1,
::ffff:192.0.2.7 for 192.0.2.7) is one address to both.
"""

import socket

_MAPPED = b"\0" * 10 + b"\xff\xff"  # ::ffff:0:0/96, IPv4 clients of a dual-stack socket


def packed(address: str) -> bytes | None:
    """The bytes of an address: 4 for IPv4 and for an IPv4-mapped IPv6 address (a dual-stack
    socket or proxy gives an IPv4 client as ::ffff:192.0.2.7), 16 for IPv6 (a zone, as in
    fe80::1%eth0, dropped: it names the interface, not the address); None for what is not an
    address."""
    if not isinstance(address, str):
        return None
    try:
        return socket.inet_pton(socket.AF_INET, address)
    except (OSError, ValueError):
        pass
    try:
        found = socket.inet_pton(socket.AF_INET6, address.partition("%")[0])
    except (OSError, ValueError):
        return None
    return found[12:] if found.startswith(_MAPPED) else found
