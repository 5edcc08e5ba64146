"""Bearer tokens for the Session API: a fixed string, or a file such as the
projected service-account token the kubelet renews in runtime pods."""

import os
import threading
from typing import Optional, Tuple


class TokenSource:
    """Gives the bearer token of each request. Never shows the token in its
    repr, so that logging a client does not leak it."""

    def token(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return "<%s>" % type(self).__name__


class StaticToken(TokenSource):
    def __init__(self, token: str):
        token = token.strip()
        if not token:
            raise ValueError("agentlane: the token is empty")
        self._token = token

    def token(self) -> str:
        return self._token


class TokenFile(TokenSource):
    """The token held in a file, read again whenever the file changes (its
    identity, size or modification time), which is how the kubelet's
    rotation of a projected token is picked up. If a read fails, or finds
    the file empty, the last token read is kept."""

    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        self._token = ""
        self._stamp: Optional[Tuple[int, int, int, int]] = None

    def token(self) -> str:
        with self._lock:
            try:
                st = os.stat(self.path)
                stamp = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
                if stamp != self._stamp or not self._token:
                    with open(self.path, "r", encoding="utf-8") as f:
                        token = f.read().strip()
                    if not token:
                        raise OSError("the file is empty")
                    self._token, self._stamp = token, stamp
            except OSError as err:
                if not self._token:
                    raise OSError(
                        "agentlane: reading the token file %s: %s" % (self.path, err)
                    ) from None
            return self._token

    def __repr__(self) -> str:
        return "<TokenFile %s>" % self.path
