"""The upstream compatibility mode (`--compat upstream`): its shapes, and only in it."""

import json

import jsonschema
import pytest
import referencing
import webtest

from buildshelf import server
from buildshelf.web import openapi
from helpers import make_build, make_project, write_file

API = "/api/v2"


@pytest.fixture
def authored(data_dir):
    """A project whose commits have authors, one of them missing."""
    write_file(
        data_dir / "gamma.json",
        make_project(
            [
                make_build(
                    1,
                    "1.0",
                    commit_count=0,
                    commits=[
                        {"message": "Fix it", "hash": "ab12", "author": "Jane Doe"},
                        {"message": "Übersetzung 🚀", "hash": "cd34"},
                    ],
                ),
                make_build(2, "1.0", experimental=True, commit_count=0),
            ]
        ),
    )
    return data_dir


@pytest.fixture
def upstream_client(store):
    return webtest.TestApp(server.make_app(store, compat="upstream"))


def upstream_build(number, channel, experimental, commits):
    """What the mode serves for helpers.make_build(number, ...), written out by hand."""
    return {
        "result": "SUCCESS",
        "buildNumber": number,
        "url": f"https://ci.example.org/job/Alpha/{number}/",
        "downloadUrl": f"https://ci.example.org/job/Alpha/{number}/artifact/alpha-{number}.jar",
        "channelVersion": channel,
        "timestamp": 1700000000000 + number,
        "isExperimental": experimental,
        "commits": commits,
    }


GAMMA_1 = upstream_build(
    1,
    "1.0",
    False,
    [
        {"message": "Fix it", "hash": "ab12", "author": "Jane Doe"},
        {"message": "Übersetzung 🚀", "hash": "cd34", "author": ""},
    ],
)
GAMMA_2 = upstream_build(2, "1.0", True, [])


def test_builds_answers_the_project_and_its_builds(authored, upstream_client):
    resp = upstream_client.get(API + "/builds?project=GAMMA&experimental=true")
    assert resp.content_type == "application/json"
    assert resp.json == {"project": "gamma", "builds": [GAMMA_1, GAMMA_2]}


def test_builds_all_answers_the_builds_only(authored, upstream_client):
    resp = upstream_client.get(API + "/builds/all?project=gamma&experimental=true")
    assert resp.json == {"builds": [GAMMA_1, GAMMA_2]}
    assert upstream_client.get(API + "/builds/all?project=gamma").json == {"builds": [GAMMA_1]}
    assert upstream_client.get(API + "/builds/all?project=gamma&channel=9").json == {"builds": []}


def test_latest_is_one_build_with_result_and_authors(authored, upstream_client):
    assert upstream_client.get(API + "/builds/latest?project=gamma").json == GAMMA_1
    assert upstream_client.get(API + "/builds/latest?project=gamma&experimental=true").json == (
        GAMMA_2
    )


def test_build_fields_come_with_result_first(upstream_client):
    body = upstream_client.get(API + "/builds/latest?project=alpha").body
    assert list(json.loads(body)) == [
        "result",
        "buildNumber",
        "url",
        "downloadUrl",
        "channelVersion",
        "timestamp",
        "isExperimental",
        "commits",
    ]
    assert list(json.loads(body)["commits"][0]) == ["message", "hash", "author"]


def test_the_rest_is_as_in_the_spec(client, upstream_client):
    for target in (
        API + "/projects",
        "/healthz",
        API + "/jd?project=alpha",
        "/downloads/latest?project=alpha",
        API + "/builds?project=nope",
        API + "/builds/latest?project=alpha&channel=9",
        "/api/v1/x",
    ):
        spec, compat = (c.get(target, expect_errors=True) for c in (client, upstream_client))
        assert (compat.status_int, compat.headers.get("Location"), compat.body) == (
            spec.status_int,
            spec.headers.get("Location"),
            spec.body,
        ), target


def test_outside_the_mode_author_is_accepted_and_never_served(authored, client):
    resp = client.get(API + "/builds?project=gamma&experimental=true")
    assert resp.json[0]["commits"] == [
        {"message": "Fix it", "hash": "ab12"},
        {"message": "Übersetzung 🚀", "hash": "cd34"},
    ]
    assert b"author" not in resp.body and b"result" not in resp.body
    assert b"author" not in client.get(API + "/builds/latest?project=gamma").body


def test_two_modes_over_one_store_never_mix_shapes(authored, store):
    # Both apps serve the same Project objects.
    spec = webtest.TestApp(server.make_app(store))
    compat = webtest.TestApp(server.make_app(store, compat="upstream"))
    for _ in range(2):
        for path in ("/builds", "/builds/all"):
            assert isinstance(spec.get(f"{API}{path}?project=gamma").json, list)
            assert "builds" in compat.get(f"{API}{path}?project=gamma").json
        assert "result" not in spec.get(API + "/builds/latest?project=gamma").json
        assert compat.get(API + "/builds/latest?project=gamma").json == GAMMA_1
    assert (
        spec.get(API + "/builds?project=gamma").body
        == spec.get(API + "/builds/all?project=gamma").body
    )


def test_an_unknown_mode_is_refused(store):
    with pytest.raises(ValueError, match="unknown compat mode 'paper'"):
        server.make_app(store, compat="paper")


# --- the OpenAPI document of each mode ---------------------------------------------------------


def validator(document, pointer):
    registry = referencing.Registry().with_resource(
        "urn:doc", referencing.jsonschema.DRAFT202012.create_resource(document)
    )
    return jsonschema.Draft202012Validator({"$ref": "urn:doc" + pointer}, registry=registry)


def response_schema(document, path):
    ref = document["paths"][path]["get"]["responses"]["200"]
    while "$ref" in ref:
        name = ref["$ref"].rsplit("/", 1)[1]
        ref = document["components"]["responses"][name]
    return ref["content"]["application/json"]["schema"]["$ref"]


def test_each_mode_serves_the_document_of_its_shapes(client, upstream_client):
    assert client.get(API + "/openapi.json").json == openapi.document()
    assert upstream_client.get(API + "/openapi.json").json == openapi.document("upstream")
    assert openapi.document("upstream") != openapi.document()


@pytest.mark.parametrize("path", ["/builds", "/builds/all", "/builds/latest"])
def test_answers_of_each_mode_match_its_document_and_not_the_others(
    authored, client, upstream_client, path
):
    upstream_document = openapi.document("upstream")
    target = f"{API}{path}?project=gamma&experimental=true"
    for document, answering, other in (
        (openapi.document(), client, upstream_client),
        (upstream_document, upstream_client, client),
    ):
        check = validator(document, response_schema(document, API + path))
        check.validate(answering.get(target).json)
        assert not check.is_valid(other.get(target).json)


def test_the_upstream_document_is_valid_and_its_examples_too():
    document = openapi.document("upstream")
    for name, schema in document["components"]["schemas"].items():
        jsonschema.Draft202012Validator.check_schema(schema)
        for example in schema.get("examples", []):
            validator(document, f"#/components/schemas/{name}").validate(example)
    assert json.loads(json.dumps(document)) == document
