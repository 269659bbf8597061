"""The API's JSON shapes, made from the model's declaration (model.py): the fields served,
under their JSON names, in their order, in the spec's shapes or the upstream's. The OpenAPI
document's schemas come from the same declaration (`schemas`).
"""

import io
import typing
from operator import attrgetter

import msgspec

import upstream
from answers import encode
from model import Build, Commit, Project, served_fields

ENCODE_SLICE = 1000  # builds encoded in one call
SCHEMA_REF = "#/components/schemas/{name}"


def json_maker(struct: type, mode: str | None = None) -> typing.Callable[[object], dict]:
    """A function making the JSON object of a `struct` value: its fields served in `mode`,
    under their JSON names, in order; a field of structs holds their JSON objects."""
    fields = served_fields(struct, mode)
    keys = tuple(field.encode_name for field in fields)
    values = attrgetter(*(field.name for field in fields))
    nested = {
        field.encode_name: json_maker(item, mode)
        for field in fields
        if (item := _struct_items(field.type)) is not None
    }

    def to_json(value):
        obj = dict(zip(keys, values(value)))
        for key, make in nested.items():
            obj[key] = [make(item) for item in obj[key]]
        return obj

    return to_json


def _struct_items(kind):
    """The struct type a field of `kind` (tuple[Struct, ...], maybe Annotated) holds, or None."""
    args = typing.get_args(typing.get_args(kind)[0] if typing.get_origin(kind) else kind)
    return (
        args[0]
        if args and isinstance(args[0], type) and issubclass(args[0], msgspec.Struct)
        else None
    )


project_json = json_maker(Project)


class Shapes:
    """The JSON of builds in one mode: None (the spec's) or upstream.MODE."""

    def __init__(self, mode: str | None = None):
        self.mode = mode
        fields = json_maker(Build, mode)
        extra = upstream.BUILD_FIELDS if mode else {}
        self.build_json = (lambda build: {**extra, **fields(build)}) if extra else fields

    def build(self, build: Build) -> bytes:
        return encode(self.build_json(build))

    def build_list(self, project: Project, builds: tuple, with_project: bool) -> bytes:
        """The JSON of `builds`: an array, or the upstream's envelope (with the project's slug
        when `with_project`)."""
        if self.mode:
            return encode(
                upstream.envelope(project, [self.build_json(b) for b in builds], with_project)
            )
        # A slice at a time: one long call into the C encoder would hold the interpreter
        # lock, and every other request with it, for a list of a million.
        out = io.BytesIO()  # its getvalue() hands over its buffer: no second copy of the body
        out.write(b"[")
        for i in range(0, len(builds), ENCODE_SLICE):
            if i:
                out.write(b",")
            out.write(encode([self.build_json(b) for b in builds[i : i + ENCODE_SLICE]])[1:-1])
        out.write(b"]")
        return out.getvalue()


def schemas(mode: str | None = None) -> dict:
    """The OpenAPI schemas of Project, Build and Commit as `mode` serves them: every served
    field required, no other field allowed."""
    _, components = msgspec.json.schema_components((Project, Build), ref_template=SCHEMA_REF)
    for name, struct in (("Project", Project), ("Build", Build), ("Commit", Commit)):
        schema = components[name]
        served = [field.encode_name for field in served_fields(struct, mode)]
        schema.pop("title", None)
        schema["properties"] = {key: schema["properties"][key] for key in served}
        for prop in schema["properties"].values():
            prop.pop("default", None)
        if name == "Build" and mode:
            schema["properties"] = {**upstream.BUILD_FIELD_SCHEMAS, **schema["properties"]}
        schema["required"] = list(schema["properties"])
        schema["additionalProperties"] = False
    return {name: components[name] for name in ("Project", "Build", "Commit")}
