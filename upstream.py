"""The upstream Canvas API's live response shapes, served with `--compat upstream`.

The official Java client (io.canvasmc.canvas.ClientV2) reads these and not the spec's: a
`builds` envelope instead of a bare array, `result` on every build, `author` on every commit.
The spec's shapes stay the default; server.py picks one set per app.
"""

MODE = "upstream"


def build_json(build):
    """A build as the upstream serves it: the spec's fields with `result` and commit authors."""
    # Every build in the data is a finished, downloadable one: the upstream's "SUCCESS".
    return {
        "result": "SUCCESS",
        "buildNumber": build.number,
        "url": build.url,
        "downloadUrl": build.download_url,
        "channelVersion": build.channel,
        "timestamp": build.timestamp,
        "isExperimental": build.is_experimental,
        "commits": [
            {"message": c.message, "hash": c.hash, "author": c.author} for c in build.commits
        ],
    }


def build_list_json(project, builds, with_project):
    """/builds names the project in its envelope; /builds/all does not (as upstream)."""
    listed = [build_json(b) for b in builds]
    return {"project": project.slug, "builds": listed} if with_project else {"builds": listed}
