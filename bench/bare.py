"""The yardstick: a bare waitress WSGI app that returns fixed answers, no routing, no store.

Usage: python bench/bare.py PORT ANSWERS.json, where ANSWERS.json maps "path?query" (or "path")
to {"body": latin-1 text, "headers": [[name, value], ...]}: the bytes and headers Buildshelf
sent for that request, so both servers put the same bytes on the wire.

Waitress runs with its own defaults (4 threads, its logging untouched) but one: its
connection_limit of 100 would leave 156 of 256 benchmark clients waiting forever, so it is
Buildshelf's 900.
"""

import json
import sys

import waitress


def make_app(answers):
    """answers: {target: (body bytes, [(name, value), ...])}."""

    def app(environ, start_response):
        query = environ["QUERY_STRING"]
        body, headers = answers[environ["PATH_INFO"] + ("?" + query if query else "")]
        start_response("200 OK", headers + [("Content-Length", str(len(body)))])
        return [body]

    return app


def load(answers_file):
    with open(answers_file) as f:
        return {
            target: (
                answer["body"].encode("latin-1"),
                [(name, value) for name, value in answer["headers"]],
            )
            for target, answer in json.load(f).items()
        }


if __name__ == "__main__":
    port, answers_file = int(sys.argv[1]), sys.argv[2]
    waitress.serve(
        make_app(load(answers_file)), host="127.0.0.1", port=port, connection_limit=900, _quiet=True
    )
