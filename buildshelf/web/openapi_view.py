"""The OpenAPI document as the API page shows it to people (`api_view`): every operation
with its parameters and responses, then every schema, each schema said in a few words
(`schema_text`) and the prose in paragraphs, `code` marked (`prose`).
"""

import json
from types import SimpleNamespace


def prose(text):
    """Markdown-light text as paragraphs, each a list of (is code, text): `x` is code."""
    return [
        [(i % 2 == 1, part) for i, part in enumerate(paragraph.split("`")) if part]
        for paragraph in (text or "").split("\n\n")
    ]


RULES = ("format", "pattern", "minimum", "maximum", "minLength", "maxLength", "default")


def schema_text(schema):
    """A schema in a few words: the schema it names, or its type, and its rules."""
    if "$ref" in schema:
        words = schema["$ref"].rsplit("/", 1)[1]
    elif "const" in schema:
        words = json.dumps(schema["const"])
    elif "enum" in schema:
        words = "one of " + ", ".join(json.dumps(value) for value in schema["enum"])
    elif "anyOf" in schema:
        words = " or ".join(schema_text(choice) for choice in schema["anyOf"])
    elif schema.get("type") == "array":
        words = "array of " + schema_text(schema["items"])
    else:
        words = schema.get("type", "any value")
    rules = [f"{rule} {json.dumps(schema[rule])}" for rule in RULES if rule in schema]
    # A response narrows a schema it names: the error codes it may carry.
    rules += [f"{name} {schema_text(rule)}" for name, rule in schema.get("properties", {}).items()
              if "$ref" in schema]  # fmt: skip
    return ", ".join([words, *rules])


def api_view(document):
    """What the API page shows of an OpenAPI document: every operation with its parameters
    and responses, then every schema."""
    components = document["components"]

    def resolved(item, kind):
        return components[kind][item["$ref"].rsplit("/", 1)[1]] if "$ref" in item else item

    def operation_view(path, method, operation):
        parameters = [resolved(p, "parameters") for p in operation.get("parameters", [])]
        responses = {
            status: resolved(r, "responses") for status, r in operation["responses"].items()
        }
        return SimpleNamespace(
            id=operation["operationId"],
            method=method.upper(),
            path=path,
            summary=operation["summary"],
            deprecated=operation.get("deprecated", False),
            description=prose(operation.get("description")),
            parameters=[
                SimpleNamespace(
                    name=p["name"],
                    where=p["in"],
                    required=p.get("required", False),
                    schema=schema_text(p["schema"]),
                    example=p.get("example"),
                    description=prose(p.get("description")),
                )
                for p in parameters
            ],
            responses=[
                SimpleNamespace(
                    status=status,
                    description=prose(r["description"]),
                    headers=list(r.get("headers", {})),
                    content=[
                        (media, schema_text(c["schema"]))
                        for media, c in r.get("content", {}).items()
                    ],
                )
                for status, r in responses.items()
            ],
        )

    operations = [(operation["tags"][0], operation_view(path, method, operation))
                  for path, item in document["paths"].items()
                  for method, operation in item.items()]  # fmt: skip
    return SimpleNamespace(
        info=document["info"],
        description=prose(document["info"]["description"]),
        tags=[
            SimpleNamespace(
                name=tag["name"],
                description=tag["description"],
                operations=[o for name, o in operations if name == tag["name"]],
            )
            for tag in document["tags"]
        ],
        schemas=[
            SimpleNamespace(
                name=name,
                description=prose(schema.get("description")),
                type=schema_text({k: v for k, v in schema.items() if k != "properties"}),
                required=schema.get("required", []),
                properties=[
                    (key, schema_text(value), prose(value.get("description")))
                    for key, value in schema.get("properties", {}).items()
                ],
                examples=[
                    json.dumps(e, indent=2, ensure_ascii=False) for e in schema.get("examples", [])
                ],
            )
            for name, schema in components["schemas"].items()
        ],
    )
