"""The yardstick: a bare waitress WSGI app that returns fixed bytes, no routing, no store.

Usage: python bench/bare.py PORT BODIES.json, where BODIES.json maps "path?query" (or "path") to the
body (latin-1 text) to send for it.
"""

import json
import sys

import waitress


def make_app(bodies):
    def app(environ, start_response):
        query = environ["QUERY_STRING"]
        body = bodies[environ["PATH_INFO"] + ("?" + query if query else "")]
        start_response("200 OK", [("Content-Type", "application/json"),
                                  ("Content-Length", str(len(body)))])
        return [body]
    return app


if __name__ == "__main__":
    port, bodies_file = int(sys.argv[1]), sys.argv[2]
    with open(bodies_file) as f:
        bodies = {target: body.encode("latin-1") for target, body in json.load(f).items()}
    waitress.serve(make_app(bodies), host="127.0.0.1", port=port, threads=4, _quiet=True)
