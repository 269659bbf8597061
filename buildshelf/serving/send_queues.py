"""Connections held open past the server's close until their clients have every byte: what
the kernel still holds to send when the process exits goes on being sent on a host, but is
lost in a container, whose network goes with its PID 1 (issue 37: 2.5 of 5.2 MB arrived)."""

import fcntl
import socket
import struct
import termios
import time

# linux/tcp_states.h: a connection reset, or closed both ways, sends nothing more.
TCP_CLOSE = 7
POLL_SECONDS = 0.01


def unsent_bytes(sock: socket.socket) -> int:
    """The bytes the kernel holds for `sock` that its peer has not acknowledged, its FIN
    counted (Linux's SIOCOUTQ); 0 once the connection is over, or where it cannot be told."""
    try:
        if sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] == TCP_CLOSE:
            return 0
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
    except (OSError, AttributeError):  # not Linux, or not TCP
        return 0


class HeldSockets:
    """A second descriptor of each of some sockets, so that the server's close of its own
    sends nothing and loses nothing: `flush` ends them once their peers have all."""

    def __init__(self, sockets):
        self.copies = []
        for sock in sockets:
            try:
                self.copies.append(sock.dup())
            except OSError:  # out of descriptors: that one is closed as before
                pass

    def flush(self, deadline: float) -> int:
        """Shut each socket's sending side (its FIN queued behind its data), wait until every
        peer has acknowledged all, or until `deadline` (time.monotonic()), and close them; the
        number given up on. Call it once the server has closed its own descriptors."""
        for sock in self.copies:
            try:
                sock.shutdown(socket.SHUT_WR)
            except OSError:  # reset by the peer already
                pass
        waiting = [sock for sock in self.copies if unsent_bytes(sock)]
        while waiting and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
            waiting = [sock for sock in waiting if unsent_bytes(sock)]
        for sock in self.copies:
            sock.close()
        return len(waiting)
