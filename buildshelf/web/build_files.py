"""A build's files as the API shows them beside the spec's fields (`files_json`): by key, the
primary first as `server:default`, then its extra files, each in the shape of Fill (PaperMC's
download service), whose clients read `downloads["server:default"].url`: `name`,
`checksums.sha256`, `size`, `url` (`FileDownload`, the OpenAPI schema's declaration too).
"""

from collections.abc import Callable
from typing import Annotated

import msgspec

from buildshelf.model import (
    DOWNLOAD_KEY_PATTERN,
    HTTP_URL,
    PRIMARY_KEY,
    SHA256_PATTERN,
    Build,
    Kept,
    json_pattern,
)


class Checksums(msgspec.Struct):
    """A file's checksums."""

    sha256: Annotated[
        str,
        msgspec.Meta(
            description="Its SHA-256, 64 lowercase hexadecimal digits.",
            pattern=json_pattern(SHA256_PATTERN),
        ),
    ]


class FileDownload(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A file of a build, in Fill's shape. `checksums` and `size` are left out for a file
    kept elsewhere whose data file gives none."""

    name: Annotated[
        str,
        msgspec.Meta(
            description='The file\'s name, as its URL ends (`""` for a URL whose path ends in `/`).'
        ),
    ]
    checksums: Checksums | msgspec.UnsetType = msgspec.UNSET
    size: Annotated[int, msgspec.Meta(ge=0, description="Its size in bytes.")] | (
        msgspec.UnsetType
    ) = msgspec.UNSET
    url: Annotated[
        str, msgspec.Meta(description="Where it is downloaded.", extra_json_schema=HTTP_URL)
    ]


def files_json(build: Build, url_of: Callable[[Kept], str]) -> dict:
    """The JSON of `build`'s files by key, the primary first: each a FileDownload, its URL
    `url_of(file)`."""
    return {
        key: msgspec.to_builtins(
            FileDownload(
                name=file.file_name,
                checksums=msgspec.UNSET if file.sha256 is msgspec.UNSET else Checksums(file.sha256),
                size=file.size,
                url=url_of(file),
            )
        )
        for key, file in build.files
    }


# The OpenAPI schema of a build's `downloads`, its files as files_json gives them.
BUILD_DOWNLOADS = {
    "description": "Only on a build with extra files: its files by key (`kind:variant`), in "
    "Fill's shape, the primary first as `server:default` (its `url` the build's "
    "`downloadUrl`), then the extra files. Never with `--compat upstream`.",
    "type": "object",
    "propertyNames": {"pattern": json_pattern(DOWNLOAD_KEY_PATTERN)},
    "additionalProperties": {"$ref": "#/components/schemas/FileDownload"},
    "required": [PRIMARY_KEY],
    "minProperties": 2,
}
