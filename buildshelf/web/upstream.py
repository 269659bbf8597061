"""The upstream Canvas API's live response shapes, served with `--compat upstream`.

The official Java client (io.canvasmc.canvas.ClientV2) reads these and not the spec's: a
`builds` envelope instead of a bare array, `result` on every build, `author` on every commit
(the model marks it upstream-only). The spec's shapes stay the default; shapes.py makes both.
"""

MODE = "upstream"
# Fields the upstream serves before the spec's on every build. Every build in the data is a
# finished, downloadable one: the upstream's "SUCCESS".
BUILD_FIELDS = {"result": "SUCCESS"}
BUILD_FIELD_SCHEMAS = {
    "result": {
        "description": "Always `SUCCESS`: every build served is a finished, downloadable one.",
        "const": "SUCCESS",
    }
}


def envelope(project, builds: list, with_project: bool) -> dict:
    """/builds names the project in its envelope; /builds/all does not (as upstream)."""
    return {"project": project.slug, "builds": builds} if with_project else {"builds": builds}
