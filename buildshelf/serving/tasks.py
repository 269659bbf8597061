"""The tasks that answer a guarded connection's requests on waitress's worker threads
(GuardedTask; GuardedErrorTask, waitress's answer to a request it could not read): the app's
environ given what the loop thread found (a request malformed or refused, a credential proven,
the body's consumer), the connection kept alive after 204 and 304, and each answer's record
handed to the access log once it is sent (AccessLogged).

The connection whose requests they answer is connection.py's.
"""

import time

from waitress.channel import ClientDisconnected
from waitress.task import ErrorTask, WSGITask
from waitress.utilities import InternalServerError

from buildshelf.web.contract import CONSUMED, MALFORMED, PROVEN, REFUSED


class AccessLogged:
    """A waitress task that hands the server's access_log a record of the request it answered,
    once the answer is sent or its connection closed (GuardedChannel.log_when_sent): waitress
    sends most of a body after the task is done, and a client may leave before the end."""

    header_bytes = 0

    def service(self):
        started = time.perf_counter()
        self.starts_at = self.channel.queued()
        try:
            super().service()
        except Exception as error:
            if not (self.wrote_header or isinstance(error, ClientDisconnected)):
                self.status = "500 Internal Server Error"  # waitress's answer instead
            raise
        finally:
            self.seconds = time.perf_counter() - started
            self.channel.log_when_sent(self)

    def build_response_header(self):
        header = super().build_response_header()
        self.header_bytes = len(header)
        return header


class GuardedErrorTask(AccessLogged, ErrorTask):
    """waitress's answer to a request it could not read (400, 413, 431, ...), logged."""

    def service(self):
        if isinstance(self.request.error, InternalServerError):  # logged by the failed task
            ErrorTask.service(self)
        else:
            super().service()


class GuardedTask(AccessLogged, WSGITask):
    def __init__(self, channel, request):
        super().__init__(channel, request)
        self.environ = request.environ  # made once: WSGITask.get_environment keeps it

    def get_environment(self):
        environ = super().get_environment()
        if self.request.problem:
            environ[MALFORMED] = self.request.problem
        if self.request.refused is not None:
            environ[REFUSED] = self.request.refused
        if self.request.proven is not None:
            environ[PROVEN] = self.request.proven
        body = self.request.body_rcv
        if body is not None and body.getbuf().consumer is not None:
            environ[CONSUMED] = body.getbuf().consumed
        return environ

    def set_close_on_finish(self):
        """Keep-alive after 204 and 304: waitress 3.0 closes the connection after them, for
        want of the Content-Length those answers may not carry, and clients revalidate all
        day. Close unless the client asked to, or the request was malformed or refused."""
        if (
            self.has_body
            or self.version != "1.1"
            or self.request.problem
            or self.request.refused is not None
            or self.request.headers.get("CONNECTION", "").lower() == "close"
        ):
            super().set_close_on_finish()

    def build_response_header(self):
        if self.request.problem or self.request.refused is not None:
            self.set_close_on_finish()
            self.channel.lingers = self.request.body_unread
        return super().build_response_header()
