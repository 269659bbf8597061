"""The parts of waitress and bottle that Buildshelf relies on beyond their documented API, in
one place, each with why. setup.cfg pins both to the versions tested; `missing()` names what an
installed version lacks, and tests/test_private_names.py fails with those names.

Waitress documents `serve` and `create_server` only. connection.py and serving.py subclass its
channel, parser, tasks, server and dispatcher, overriding methods and reading attributes that
it may rename in any release.
"""

import importlib
import inspect
import re

# (module, object, names, why): each name is an attribute of the object (a class attribute or
# one its methods set on self), or for a function a parameter.
PRIVATE_NAMES = (
    (
        "waitress",
        "create_server",
        ("_dispatcher",),
        "serving.serve passes its QueueWatchingDispatcher, which notes queue depth instead of "
        "logging a warning per queued request under the queue's lock",
    ),
    (
        "waitress.server",
        "TcpWSGIServer",
        (
            "_map",
            "accepting",
            "accept",
            "active_channels",
            "adj",
            "channel_class",
            "effective_host",
            "effective_port",
            "handle_accept",
            "maintenance",
            "next_channel_cleanup",
            "pull_trigger",
            "readable",
            "set_socket_options",
            "task_dispatcher",
        ),
        "serving.GuardedServer replaces the server's class after create_server made it, to "
        "accept several connections a turn, make room at the connection limit, close stalled "
        "connections and skip the wake-up pipe on the loop thread",
    ),
    (
        "waitress.channel",
        "HTTPChannel",
        (
            "_flush_exception",
            "_flush_outbufs_below_high_watermark",
            "_flush_some",
            "close_when_flushed",
            "connected",
            "creation_time",
            "error_task_class",
            "handle_read_event",
            "handle_write",
            "last_activity",
            "outbuf_lock",
            "parser_class",
            "received",
            "requests",
            "send",
            "sendbuf_len",
            "service",
            "task_class",
            "total_outbufs_len",
            "will_close",
            "writable",
        ),
        "connection.GuardedChannel never lets a worker wait for a client that does not read, "
        "answers remembered requests on the loop thread with waitress's own service(), and "
        "sends at most its share of TURN_BYTES a turn (through send and sendbuf_len)",
    ),
    (
        "waitress.parser",
        "HTTPRequestParser",
        (
            "body_rcv",
            "chunked",
            "command",
            "content_length",
            "error",
            "headers",
            "parse_header",
            "path",
            "query",
            "version",
        ),
        "connection.GuardedParser refuses request smuggling (Content-Length with "
        "Transfer-Encoding, HTTP/1.1 without Host) before the body is read",
    ),
    (
        "waitress.task",
        "WSGITask",
        (
            "build_response_header",
            "channel",
            "content_bytes_written",
            "content_length",
            "get_environment",
            "has_body",
            "request",
            "service",
            "set_close_on_finish",
            "status",
            "version",
            "wrote_header",
        ),
        "connection.GuardedTask keeps connections alive after 204 and 304, closes them after a "
        "malformed request, and hands the access log a record of each answer",
    ),
    (
        "waitress.task",
        "ThreadedTaskDispatcher",
        ("active_count", "add_task", "lock", "queue", "queue_cv", "stop_count", "threads"),
        "serving.QueueWatchingDispatcher notes the deepest queue under waitress's own lock",
    ),
    (
        "waitress.wasyncore",
        "dispatcher",
        ("close",),
        "serving.drain stops accepting without the server's close(), which stops the workers",
    ),
    (
        "bottle",
        "BaseResponse",
        ("_headers",),
        "answers.set_headers sets many headers in one dict update: bottle's per-header checks "
        "were a fifth of a request's cost in the app",
    ),
)


def missing() -> list[str]:
    """Every private name an installed waitress or bottle lacks, as 'module.object.name'."""
    absent = []
    for module_name, object_name, names, _why in PRIVATE_NAMES:
        try:
            owner = getattr(importlib.import_module(module_name), object_name)
        except (ImportError, AttributeError):
            absent.append(f"{module_name}.{object_name}")
            continue
        for name in names:
            if not _has(owner, name):
                absent.append(f"{module_name}.{object_name}.{name}")
    return absent


def _has(owner, name):
    if inspect.isfunction(owner):
        return name in inspect.signature(owner).parameters
    if hasattr(owner, name):
        return True
    # An attribute a method sets on self: seen in the source of the class or a base.
    return any(
        re.search(rf"\bself\.{name}\b", inspect.getsource(cls))
        for cls in inspect.getmro(owner)
        if cls is not object and cls.__module__.split(".")[0] in ("waitress", "bottle")
    )
