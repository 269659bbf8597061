"""Where a request comes from behind a trusted proxy (nginx): its X-Forwarded-For read by
waitress's own proxy middleware, an IPv6 hop taken whole, for the app and for the app's screen
alike; from any other peer, the proxy headers are dropped.

The server that serves the app through it is server.py's.
"""

from waitress.proxy_headers import proxy_headers_middleware

from buildshelf import addresses


def through_the_proxy(app, trusted_proxy):
    """`app` behind waitress's proxy middleware: a request from the address `trusted_proxy`
    comes from the last hop of its X-Forwarded-For (one hop, which nginx sets to its own
    client's address: deploy/nginx.conf), and from any other peer the proxy headers are
    dropped. Each hop that is an IPv6 address is put in brackets first: waitress reads an
    unbracketed hop with a dot in it as address:port, so ::ffff:203.0.113.7, as a dual-stack
    nginx writes an IPv4 client, was the address ::ffff, and all such clients one."""
    translated = proxy_headers_middleware(
        app,
        trusted_proxy=trusted_proxy,
        trusted_proxy_headers={"x-forwarded-for"} if trusted_proxy else set(),
        clear_untrusted=True,
        log_untrusted=False,
    )
    if trusted_proxy is None:
        return translated

    def bracketing(environ, start_response):
        hops = environ.get("HTTP_X_FORWARDED_FOR")
        if hops and ":" in hops and environ["REMOTE_ADDR"] == trusted_proxy:
            environ["HTTP_X_FORWARDED_FOR"] = ",".join(
                f"[{hop.strip()}]" if ":" in hop and addresses.packed(hop.strip()) else hop
                for hop in hops.split(",")
            )
        return translated(environ, start_response)

    return bracketing


def as_the_app_sees_it(screen, trusted_proxy):
    """`screen`, given the environ (a copy) as `through_the_proxy` makes it for the app
    (REMOTE_ADDR from a trusted proxy's header; the untrusted proxy headers gone)."""

    def call(environ, start_response):
        return screen(environ)

    translated = through_the_proxy(call, trusted_proxy)

    def screened(environ):
        refusal = translated(environ, lambda *answer: None)
        # A list is the middleware's own 400 (a malformed proxy header), which the app's
        # call answers too.
        return None if isinstance(refusal, list) else refusal

    return screened
