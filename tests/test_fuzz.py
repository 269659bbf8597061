"""Schema-driven fuzzing: requests made from the OpenAPI document, answers checked against it.

Hypothesis draws, for every GET operation, any mix of its documented parameters with
plausible, junk and hostile values; every answer must be a documented status (never a 5xx)
whose JSON body matches the documented schema.
"""

from urllib.parse import quote

import jsonschema
import pytest
import referencing
import webtest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from buildshelf import server
from buildshelf import store as store_module
from buildshelf.settings import default_data_dir
from buildshelf.web import openapi

DOCUMENT = openapi.document()  # the spec's shapes
REGISTRY = referencing.Registry().with_resource(
    "urn:buildshelf", referencing.jsonschema.DRAFT202012.create_resource(DOCUMENT)
)
GET_OPERATIONS = sorted(
    path for path, item in DOCUMENT["paths"].items() if "get" in item and "{" not in path
)


def escape(key):
    return key.replace("~", "~0").replace("/", "~1")


def follow(pointer):
    """The node at a '#/...' pointer in DOCUMENT, through any $ref, and its own pointer."""
    while True:
        node = DOCUMENT
        for part in pointer[2:].split("/"):
            key = part.replace("~1", "/").replace("~0", "~")
            node = node[int(key)] if isinstance(node, list) else node[key]
        if "$ref" not in node:
            return node, pointer
        pointer = node["$ref"]


def parameters(path):
    operation = f"#/paths/{escape(path)}"
    item = DOCUMENT["paths"][path]
    found = [
        follow(f"{operation}/parameters/{i}")[0] for i in range(len(item.get("parameters", [])))
    ]
    found += [
        follow(f"{operation}/get/parameters/{i}")[0]
        for i in range(len(item["get"].get("parameters", [])))
    ]
    return [p for p in found if p["in"] == "query"]


def values_for(parameter):
    """Plausible values for a parameter, then junk and hostile ones."""
    plausible = {
        "project": ["tinplate", "WAYSTONE", "tinplate-proxy", "nope", ""],
        "channel": ["1.21.3", "1.21.4-pre1", "3.3.0-SNAPSHOT", "2.0-beta.1", "9.9", ""],
        "experimental": ["true", "TRUE", "false", "yes", ""],
    }.get(parameter["name"], [])
    hostile = [
        "//evil.example",
        "..%2F..",
        "\r\nX: y",
        "\x00",
        "\u212a",
        "a" * 300,
        "%FF",
        "\ud7ff\ue000",
    ]
    return st.sampled_from(plausible + hostile) | st.text(max_size=12)


@st.composite
def requests(draw):
    path = draw(st.sampled_from(GET_OPERATIONS))
    pairs = []
    for parameter in parameters(path):
        if draw(st.booleans()):
            pairs.append((parameter["name"], draw(values_for(parameter))))
    if draw(st.integers(0, 9)) == 0:  # now and then a superseded or a repeated parameter
        pairs.append(
            draw(
                st.sampled_from(
                    [
                        ("version", "1.21"),
                        ("game_version", "1.21"),
                        ("project", "tinplate"),
                        ("x", "y"),
                    ]
                )
            )
        )
    query = "&".join(f"{quote(name)}={quote(value, safe='%')}" for name, value in pairs)
    return path, query


def response_schema_pointer(path, status, media_type):
    """Where the schema of this answer (of `media_type`, one of those the document gives
    for it: /metrics has two) is, or None for an answer without a body."""
    responses = DOCUMENT["paths"][path]["get"]["responses"]
    assert str(status) in responses, f"{status} is not documented for GET {path}"
    response, pointer = follow(f"#/paths/{escape(path)}/get/responses/{status}")
    if not response.get("content"):
        return None
    assert media_type in response["content"], f"{media_type} for {status} of GET {path}"
    return f"{pointer}/content/{escape(media_type)}/schema"


@pytest.fixture(scope="module")
def client():
    return webtest.TestApp(
        server.make_app(store_module.Store(default_data_dir(), check_interval=60))
    )


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(request=requests())
def test_every_answer_is_documented_and_matches_its_schema(client, request):
    path, query = request
    resp = client.get(f"{path}?{query}" if query else path, expect_errors=True)
    assert resp.status_int < 500
    pointer = response_schema_pointer(path, resp.status_int, resp.content_type)
    if pointer is None:
        assert resp.status_int in (302, 304) and not resp.body
        return
    validator = jsonschema.Draft202012Validator(
        {"$ref": "urn:buildshelf" + pointer}, registry=REGISTRY
    )
    assert pointer.split("/")[-2] == escape(resp.content_type)
    body = resp.json if resp.content_type == "application/json" else resp.text
    errors = sorted(validator.iter_errors(body), key=str)
    assert not errors, f"GET {path}?{query} -> {resp.status_int}: {errors[0].message}"
