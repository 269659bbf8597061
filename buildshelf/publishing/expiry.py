"""The tokens as a server watches their expiry (`TokenWatch`): read from the state directory
by a thread of its own every minute (the database opened for the read), kept in memory for
/healthz and /metrics, which read no database on a request's thread; each token's need of
attention decided at the moment asked (tokens.Token.attention), so that a token crosses
into its warning, or expires, on time.
"""

import logging
import os
import sqlite3
from collections.abc import Callable

from buildshelf import state
from buildshelf.periodic import Periodic
from buildshelf.publishing import tokens

log = logging.getLogger(__name__)

READ_EVERY_SECONDS = 60  # a token made, used or revoked shows within a minute


class TokenWatch:
    """The tokens of `state_dir`, as last read (`tokens`, a tuple), and the time now by
    `clock` (epoch milliseconds; tests set it). `refresh` reads them; `start` has a thread
    read them every `every` seconds until `stop`."""

    def __init__(
        self,
        state_dir: str,
        *,
        clock: Callable[[], int] = tokens.now_ms,
        every: float = READ_EVERY_SECONDS,
    ):
        self.state_dir, self.clock = state_dir, clock
        self.tokens: tuple[tokens.Token, ...] = ()
        self._complaint = None  # the last failure logged: said once, not every minute
        self._reader = Periodic(
            "token expiry", every, self.refresh, log, "reading the tokens failed"
        )

    def refresh(self) -> None:
        """Read the tokens again; on a failure (locked, unreadable), keep the last read and
        log it once. A state directory without a tokens database is not made one."""
        if not self.tokens and not os.path.exists(
            state.database_path(self.state_dir, tokens.SCHEMA.name)
        ):
            return
        try:
            # Opened for the read and closed: a connection kept open between reads would
            # stop another process from locking the database (locking_mode=EXCLUSIVE),
            # and a read a minute off the requests' threads can pay for an opening.
            self.tokens = tuple(tokens.list_tokens(self.state_dir))
        except (sqlite3.Error, OSError) as error:
            if str(error) != self._complaint:
                self._complaint = str(error)
                log.warning(
                    "cannot read the tokens in %s (their expiry is reported as last read): %s",
                    self.state_dir,
                    error,
                )
            return
        if self._complaint is not None:
            log.warning("the tokens in %s are read again", self.state_dir)
            self._complaint = None

    def attention(self) -> tuple[int, list[tuple[tokens.Token, str]]]:
        """(now, the tokens needing attention now with what each needs, oldest first)."""
        now = self.clock()
        needing = ((token, token.attention(now)) for token in self.tokens)
        return now, [(token, attention) for token, attention in needing if attention]

    def expiries(self) -> list[tuple[str, str, int]]:
        """(id, project, expiry) of the tokens /metrics gives (Token.watched), now."""
        now = self.clock()
        return [(t.id, t.project, t.expires) for t in self.tokens if t.watched(now)]

    def start(self) -> None:
        self.refresh()
        self._reader.start()

    def stop(self) -> None:
        self._reader.stop()
