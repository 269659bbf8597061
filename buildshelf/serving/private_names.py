"""Every name of waitress and bottle that Buildshelf uses, sorted into the documented API
and the private parts it relies on beyond it, each private one with why. setup.cfg pins both
to the versions tested; `missing()` names what an installed version lacks, and
tests/test_private_names.py fails with those names. That test also reads the code for the
names it uses of both, so a name used and not listed here fails it too.

Documented: for waitress, `serve()` and its arguments (docs/api.rst, docs/arguments.rst)
and `wsgi.file_wrapper`. `create_server()`, on which `serve()` is built, is not on its API
page: it is private, though it takes the documented arguments. For bottle 0.13, what its API
reference documents (docs/api.rst: autodoc of the documented members and functions).
Everything else is private: connection.py, parser.py, tasks.py and server.py subclass waitress's
channel, parser, tasks, server and dispatcher, overriding methods and reading attributes that it may rename in
any release.
"""

import functools
import importlib
import inspect
import re

# (module, object, names, where or why): each name is an attribute of the object (a class
# attribute, or one its methods set on self), or for a function a parameter. An empty object
# is the module itself.
DOCUMENTED = (
    (
        "waitress.adjustments",
        "Adjustments",
        (
            "channel_timeout",
            "cleanup_interval",
            "connection_limit",
            "clear_untrusted_proxy_headers",
            "host",
            "ident",
            "max_request_body_size",
            "max_request_header_size",
            "port",
            "recv_bytes",
        ),
        "the arguments of serve() (docs/arguments.rst), passed to create_server; the server "
        "reads cleanup_interval back through its adj (private, below)",
    ),
    (
        "bottle",
        "",
        ("Bottle", "HTTPError", "SimpleTemplate", "request", "response"),
        "api.rst: the Bottle class, exceptions, request context, templating",
    ),
    (
        "bottle",
        "Bottle",
        ("add_hook", "delete", "error", "get", "hook", "put", "route"),
        "api.rst: Bottle",
    ),
    (
        "bottle",
        "BaseRequest",
        ("environ", "get_header", "method", "path", "query_string"),
        "api.rst: the Request object",
    ),
    (
        "bottle",
        "BaseResponse",
        ("content_type", "headers", "set_header", "status", "status_code"),
        "api.rst: the Response object",
    ),
    ("bottle", "Route", ("method", "rule"), "api.rst: request routing"),
    ("bottle", "SimpleTemplate", ("render",), "api.rst: templating (BaseTemplate)"),
)

PRIVATE_NAMES = (
    (
        "waitress",
        "",
        ("create_server",),
        "server.serve makes the server with it rather than serve(), to turn the loop itself "
        "and to guard the server it returns (below)",
    ),
    (
        "waitress",
        "create_server",
        ("_dispatcher",),
        "server.serve passes its QueueWatchingDispatcher, which notes queue depth instead of "
        "logging a warning per queued request under the queue's lock",
    ),
    (
        "waitress.wasyncore",
        "",
        ("loop", "poll"),
        "server.serve turns the loop itself (poll), to count turns and close stalled "
        "connections between them; server.drain turns it until the busy connections finish",
    ),
    (
        "waitress.wasyncore",
        "dispatcher",
        ("close",),
        "server.drain stops accepting without the server's close(), which stops the workers",
    ),
    (
        "waitress.server",
        "BaseWSGIServer",
        (),
        "server.drain tells the listening sockets from the connections in the socket map",
    ),
    (
        "waitress.server",
        "TcpWSGIServer",
        (
            "_map",
            "accept",
            "accepting",
            "active_channels",
            "add_task",
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
            "trigger",
        ),
        "server.GuardedServer replaces the class (__class__) of the server create_server "
        "made, to accept several connections a turn (making each channel as waitress does: "
        "channel_class(server, sock, addr, adj, map)), make room at the connection limit, "
        "close stalled connections, hold back a pipelined request (add_task) and skip the "
        "wake-up pipe on the loop thread; serve reads the socket map and the address bound; "
        "a deciding thread hands a screen's verdict back to the loop thread through the "
        "wake-up pipe's thunks (trigger.pull_trigger(thunk))",
    ),
    (
        "waitress.task",
        "ThreadedTaskDispatcher",
        (
            "active_count",
            "add_task",
            "lock",
            "queue",
            "queue_cv",
            "set_thread_count",
            "shutdown",
            "stop_count",
            "threads",
        ),
        "server.QueueWatchingDispatcher notes the deepest queue under waitress's own lock; "
        "serve starts its threads (set_thread_count) and stops them (shutdown)",
    ),
    (
        "waitress.channel",
        "HTTPChannel",
        (
            "_flush_exception",
            "_flush_outbufs_below_high_watermark",
            "_flush_some",
            "addr",
            "close_when_flushed",
            "connected",
            "creation_time",
            "error_task_class",
            "handle_close",
            "handle_read",
            "handle_read_event",
            "handle_write",
            "last_activity",
            "outbuf_lock",
            "parser_class",
            "received",
            "recv",
            "request",
            "requests",
            "requests_lock",
            "send",
            "send_continue",
            "sendbuf_len",
            "server",
            "service",
            "socket",
            "task_class",
            "total_outbufs_len",
            "will_close",
            "writable",
        ),
        "connection.GuardedChannel never lets a worker wait for a client that does not read, "
        "answers remembered requests on the loop thread with waitress's own service(), and "
        "sends at most its share of TURN_BYTES a turn (through send and sendbuf_len), and "
        "closes a connection whose file shrank while it was sent (_flush_some, will_close); "
        "makes each request's parser (parser_class, a method here), closes the buffer of a "
        "body still arriving (request), and those of requests held back that no task will take "
        "once it closes (requests, under requests_lock) and, after refusing a request whose body it did not "
        "read, shuts the socket's sending side and reads and drops (handle_read, recv, which "
        "closes at the end) before closing (handle_close); "
        "once a deferred verdict lets a request's body in, sends the 100 Continue waitress "
        "held back (send_continue), or queues a request with no body as received() does "
        "(requests, requests_lock, request); "
        "server.py closes stalled and idle ones (handle_close); the access log names the "
        "peer (addr) of a request that has no environ, and reaches the server's access_log "
        "through the channel (server)",
    ),
    (
        "waitress.buffers",
        "ReadOnlyFileBasedBuffer",
        ("get", "prepare"),
        "waitress's wsgi.file_wrapper, which the code never names: downloads._File ends where "
        "the answer ends for its prepare(), which measures the body by seeking to the file's "
        "end, and its get() meets downloads.FileShrank, which the channel's _flush_some "
        "catches; a release that measured or read otherwise would frame answers anew",
    ),
    (
        "waitress.channel",
        "ClientDisconnected",
        (),
        "tasks.AccessLogged tells a client that left from a failed answer",
    ),
    (
        "waitress.parser",
        "HTTPRequestParser",
        (
            "body_bytes_received",
            "body_rcv",
            "chunked",
            "close",
            "command",
            "completed",
            "content_length",
            "error",
            "expect_continue",
            "get_body_stream",
            "headers",
            "headers_finished",
            "parse_header",
            "path",
            "query",
            "received",
            "version",
        ),
        "parser.GuardedParser refuses request smuggling (Content-Length with "
        "Transfer-Encoding, HTTP/1.1 without Host) before the body is read, and a request the "
        "screen refuses once its head is parsed (parse_header): it drops the body "
        "(body_rcv, chunked, content_length, expect_continue, so that the channel sends no "
        "100 Continue), turns waitress's RequestEntityTooLarge (error, completed) into the "
        "app's JSON 413, consumes what follows the head of such a request (received), gives "
        "the screen's environ no body yet (get_body_stream); the channel closes the buffer of "
        "a body still arriving (close), and one that trickles in, by its pace "
        "(body_bytes_received); while the screen's verdict is decided, it holds what comes "
        "after the head (received, headers_finished) and keeps a request with no body from "
        "being complete (completed); the access log reads the method and target",
    ),
    (
        "waitress.receiver",
        "FixedStreamReceiver",
        ("buf", "getbuf"),
        "parser.GuardedParser replaces the buffer a body is received into (buf) with a "
        "bodies.BodyBuffer, and reads its error back (getbuf): waitress's spills to $TMPDIR",
    ),
    (
        "waitress.buffers",
        "OverflowableBuffer",
        ("close", "getfile"),
        "bodies.BodyBuffer stands in for it as the buffer of a body: the receivers append "
        "to it and measure it, the parser's get_body_stream reads it through getfile, and "
        "close drops it",
    ),
    (
        "waitress.receiver",
        "ChunkedReceiver",
        ("buf", "getbuf"),
        "the same as FixedStreamReceiver's, for a chunked body",
    ),
    (
        "waitress.utilities",
        "RequestEntityTooLarge",
        (),
        "parser.GuardedParser answers waitress's refusal of a body over the limit in JSON",
    ),
    (
        "waitress.proxy_headers",
        "",
        ("proxy_headers_middleware",),
        "proxy.through_the_proxy wraps the app and the screen in the middleware that "
        "waitress would wrap the app in, so that the screen sees REMOTE_ADDR as the app does, "
        "a trusted proxy's client; it relies on waitress reading a hop in brackets as the "
        "address inside them (it puts an IPv6 hop in brackets first: waitress reads one with "
        "a dot, ::ffff:203.0.113.7, as address:port)",
    ),
    (
        "waitress.proxy_headers",
        "proxy_headers_middleware",
        ("clear_untrusted", "log_untrusted", "trusted_proxy", "trusted_proxy_headers"),
        "proxy.through_the_proxy passes the settings create_server would pass it",
    ),
    (
        "waitress.task",
        "WSGITask",
        (
            "build_response_header",
            "channel",
            "environ",
            "get_environment",
            "has_body",
            "request",
            "response_headers",
            "service",
            "set_close_on_finish",
            "status",
            "version",
            "wrote_header",
        ),
        "tasks.GuardedTask keeps connections alive after 204 and 304, closes them after a "
        "malformed request, gives get_environment() the environ made on the loop thread "
        "(environ, which waitress keeps, and in which the access log finds REMOTE_ADDR as the "
        "app saw it), and hands the access log a record of each answer "
        "once it is sent: its header's length (build_response_header) tells where its body "
        "starts, and an X-Accel-Redirect among its response_headers that nginx sends it",
    ),
    (
        "waitress.task",
        "ErrorTask",
        ("service",),
        "tasks.GuardedErrorTask logs waitress's answers to requests it could not read",
    ),
    (
        "waitress.utilities",
        "InternalServerError",
        (),
        "tasks.GuardedErrorTask leaves out of the log the 500 a failed task logged",
    ),
    (
        "bottle",
        "BaseResponse",
        ("__contains__", "_headers"),
        "answers.set_headers sets many headers in one dict update: bottle's per-header checks "
        "were a fifth of a request's cost in the app; set_common_headers asks `name in "
        "response`",
    ),
    (
        "bottle",
        "Bottle",
        ("routes", "wsgi"),
        "server.make_app routes OPTIONS for every GET rule (routes, an undocumented "
        "attribute) and wraps the instance's wsgi, which Bottle.__call__ calls: the app stays "
        "a Bottle, and repeats are answered from memory",
    ),
    (
        "bottle",
        "Bottle",
        ("router",),
        "metrics.Requests asks the app's router (its match(environ), undocumented too) for "
        "the rule of each request's route, those answered from memory, which never reach "
        "bottle, included",
    ),
    (
        "bottle",
        "HTTPError",
        ("body", "traceback"),
        "the error handlers (answers.error_response, pages) read the message and, for a 500, "
        "the traceback that bottle keeps on the error: attributes its docs do not name",
    ),
    (
        "bottle",
        "",
        ("WSGIFileWrapper",),
        "answers.from_memory wraps a large body when the server gives no wsgi.file_wrapper",
    ),
)


def missing() -> list[str]:
    """Every name listed that an installed waitress or bottle lacks, as 'module.object.name'."""
    absent = []
    for module_name, object_name, names, _why in DOCUMENTED + PRIVATE_NAMES:
        try:
            owner = importlib.import_module(module_name)
            if object_name:
                owner = getattr(owner, object_name)
        except (ImportError, AttributeError):
            absent.append(f"{module_name}.{object_name}".rstrip("."))
            continue
        for name in names:
            if not has(owner, name):
                absent.append(".".join(filter(None, (module_name, object_name, name))))
    return absent


def has(owner, name) -> bool:
    """Whether `owner` (a module, class or function of waitress or bottle) has `name`."""
    if inspect.isfunction(owner):
        return name in inspect.signature(owner).parameters
    if hasattr(owner, name):
        return True
    # An attribute a method sets on self: seen in the source of the class or a base.
    return inspect.isclass(owner) and any(
        name in _set_on_self(cls)
        for cls in inspect.getmro(owner)
        if cls is not object and cls.__module__.split(".")[0] in ("waitress", "bottle")
    )


@functools.cache
def _set_on_self(cls):
    return frozenset(re.findall(r"\bself\.(\w+)", inspect.getsource(cls)))
