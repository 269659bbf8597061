"""The API's JSON shapes, made from the model's declaration (model.py): the fields served,
under their JSON names, in their order, in the spec's shapes or the upstream's. The OpenAPI
document's schemas come from the same declaration (`schemas`).
"""

import io
import typing
from operator import attrgetter

import msgspec
from msgspec import Meta

from buildshelf.model import Build, Commit, Project, served_fields
from buildshelf.web import upstream
from buildshelf.web.answers import encode

ENCODE_SLICE = 1000  # builds encoded in one call
SCHEMA_REF = "#/components/schemas/{name}"


def json_maker(struct: type, mode: str | None = None) -> typing.Callable[[object], dict]:
    """A function making the JSON object of a `struct` value: its fields served in `mode`,
    under their JSON names, in order; a field of structs holds their JSON objects."""
    fields = served_fields(struct, mode)
    keys = tuple(field.encode_name for field in fields)
    names = [field.name for field in fields]
    values = attrgetter(*names) if len(names) > 1 else lambda value: (getattr(value, names[0]),)
    nested = {
        field.encode_name: json_maker(item, mode)
        for field in fields
        if (item := _struct_items(field.type)) is not None
    }

    optional = any(field.default is msgspec.UNSET for field in fields)

    def to_json(value):
        obj = dict(zip(keys, values(value)))
        if optional:  # a field a value does not have is left out
            obj = {key: item for key, item in obj.items() if item is not msgspec.UNSET}
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
DOWNLOADS = "/downloads"  # the upstream's path, outside the API prefix; kept files live under it
SIDECAR = ".sha256"  # added to a kept file's URL: its `sha256sum -c` line


def hosted_path(project: Project, build: Build) -> str:
    """Where a kept file is served: named by its project, build and bytes, and ending with
    its name, so that a URL's bytes never change and clients save it under its name."""
    return f"{DOWNLOADS}/{project.slug}/{build.number}/{build.sha256}/{build.file}"


class Shapes:
    """The JSON of builds in one mode, None (the spec's) or upstream.MODE; a kept file's
    downloadUrl is on `public_url`."""

    def __init__(self, mode: str | None = None, public_url: str = ""):
        self.mode, self.public_url = mode, public_url
        self._fields = json_maker(Build, mode)
        self._extra = upstream.BUILD_FIELDS if mode else {}

    def build_json(self, project: Project, build: Build) -> dict:
        obj = self._fields(build)
        if build.hosted:
            obj["downloadUrl"] = self.download_url(project, build)
        return {**self._extra, **obj} if self._extra else obj

    def download_url(self, project: Project, build: Build) -> str:
        return self.public_url + hosted_path(project, build) if build.hosted else build.download_url

    def build(self, project: Project, build: Build) -> bytes:
        return encode(self.build_json(project, build))

    def build_list(self, project: Project, builds: tuple, with_project: bool) -> bytes:
        """The JSON of `builds`: an array, or the upstream's envelope (with the project's slug
        when `with_project`)."""
        if self.mode:
            return encode(
                upstream.envelope(
                    project, [self.build_json(project, b) for b in builds], with_project
                )
            )
        # A slice at a time: one long call into the C encoder would hold the interpreter
        # lock, and every other request with it, for a list of a million.
        out = io.BytesIO()  # its getvalue() hands over its buffer: no second copy of the body
        out.write(b"[")
        for i in range(0, len(builds), ENCODE_SLICE):
            if i:
                out.write(b",")
            chunk = [self.build_json(project, b) for b in builds[i : i + ENCODE_SLICE]]
            out.write(encode(chunk)[1:-1])
        out.write(b"]")
        return out.getvalue()


# /healthz: what the server serves, and what it does not serve as it is on disk.
_ISO_TIME = Meta(
    extra_json_schema={
        "format": "date-time",
        "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$",
    }
)


def _text(description, **schema):
    return typing.Annotated[str, Meta(description=description, extra_json_schema=schema)]


class RejectedFile(msgspec.Struct):
    """A data file not served as it is on disk. A project whose file broke keeps serving its
    last good version."""

    file: _text("The file's name in the data directory; `.` for the directory itself.", minLength=1)
    error: _text("The first problem and where in the file it is.", minLength=1)
    errors: typing.Annotated[
        list[str],
        Meta(
            min_length=1,
            description="Every problem of the file, each with its place (20 at most, then a "
            "line saying how many more); the first is `error`.",
        ),
    ]


class UnavailableFile(msgspec.Struct):
    """A kept file that cannot be downloaded: its object in the artifact store is missing or
    damaged. Its downloads answer 503 `artifact_unavailable`; everything else still serves."""

    project: str
    build: typing.Annotated[int, Meta(ge=0)]
    file: _text("The file's name, as its download URL ends.", minLength=1)
    problem: _text("What is wrong with the object, and its place on disk.", minLength=1)


class StalledRead(msgspec.Struct):
    """A read that has lasted longer than a check waits."""

    file: str
    seconds: typing.Annotated[float, Meta(ge=0)]


class Health(msgspec.Struct, rename="camel"):
    """What the server serves."""

    status: _text(
        "`ok` when every data file and every kept file is served as it is on disk; "
        "`degraded` when some are not (`rejectedFiles`, `unavailableFiles`: the rest serves), "
        "or when a part of the service reports a problem (`downloadCounting`); "
        "`stalled` when a file has been read for longer than a check waits, or a check takes "
        "too long: the data served may be out of date; `no_data` when no project at all is "
        "served (status 503).",
        enum=["ok", "degraded", "stalled", "no_data"],
    )
    projects: typing.Annotated[int, Meta(ge=0, description="How many projects are served.")]
    last_reload: typing.Annotated[
        str, _ISO_TIME, Meta(description="When the served data last changed, UTC.")
    ]
    last_check: typing.Annotated[
        str,
        _ISO_TIME,
        Meta(
            description="When the data files were last checked for changes, UTC (about every second)."
        ),
    ]
    check_running_for: typing.Annotated[
        float | None,
        Meta(
            description="Seconds the check under way has taken, or null.",
            extra_json_schema={"minimum": 0},
        ),
    ]
    rejected_files: typing.Annotated[
        list[RejectedFile], Meta(description="Every data file not served as it is on disk.")
    ]
    unavailable_files: typing.Annotated[
        list[UnavailableFile],
        Meta(description="Every kept file of a served build whose object is missing or damaged."),
    ]
    stalled_reads: typing.Annotated[
        list[StalledRead],
        Meta(
            description="Files (or `.`, the directory listing, or `artifacts/`, the kept files' "
            "check) whose read has lasted longer than a check waits, with how long; each keeps "
            "its last good version meanwhile."
        ),
    ]
    download_counting: typing.Annotated[
        str,
        Meta(
            min_length=1,
            description="Present only when download counts cannot be written to the state "
            "directory's database (locked, full, read-only): why. The counts wait in memory "
            "and downloads are served as ever.",
        ),
    ] = msgspec.UNSET


def health_json(health: Health, problems: dict | None = None) -> bytes:
    """The health report, with the fields the service's parts add (`problems`)."""
    return encode({**msgspec.to_builtins(health), **(problems or {})})


def schemas(mode: str | None = None) -> dict:
    """The OpenAPI schemas of what the API serves, as `mode` serves it: Project, Build and
    Commit with the fields served in `mode`, and the health report. Every field is required,
    no other field allowed."""
    _, components = msgspec.json.schema_components(
        (Project, Build, Health), ref_template=SCHEMA_REF
    )
    for name, schema in components.items():
        schema.pop("title", None)
        if "description" in schema:  # a docstring, its lines joined
            schema["description"] = " ".join(schema["description"].split())
        struct = {"Project": Project, "Build": Build, "Commit": Commit}.get(name)
        if struct is not None:
            keys = [field.encode_name for field in served_fields(struct, mode)]
            schema["properties"] = {key: schema["properties"][key] for key in keys}
        for prop in schema["properties"].values():
            prop.pop("default", None)
        if name == "Build" and mode:
            schema["properties"] = {**upstream.BUILD_FIELD_SCHEMAS, **schema["properties"]}
        with_optional = struct or (Health if name == "Health" else None)
        fields = msgspec.structs.fields(with_optional) if with_optional else ()
        optional = {f.encode_name for f in fields if f.default is msgspec.UNSET}
        optional &= schema["properties"].keys()
        schema["required"] = [key for key in schema["properties"] if key not in optional]
        if optional and struct:  # served together or not at all
            schema["dependentRequired"] = {
                key: sorted(optional - {key}) for key in sorted(optional)
            }
        schema["additionalProperties"] = False
    return components
