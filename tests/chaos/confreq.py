"""One request to a KungFu config server (launch/config_server.h: REST on /config, bearer
token), from this process or, as a script, from inside a network namespace:
    ip netns exec NS /usr/bin/python3 confreq.py METHOD URL TOKEN [BODY]
prints the status code, a tab, and the body."""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from typing import Optional


def request(method: str, url: str, token: str, body: Optional[str] = None,
            timeout: float = 2.0) -> tuple[int, str]:
    """(HTTP status, body); status 0 and the reason when the server cannot be reached."""
    data = body.encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, OSError) as e:
        return 0, str(e)


def main(argv: list[str]) -> int:
    """The script form: METHOD URL TOKEN [BODY]."""
    if len(argv) not in (4, 5):
        print("usage: confreq.py METHOD URL TOKEN [BODY]", file=sys.stderr)
        return 2
    status, text = request(argv[1], argv[2], argv[3], argv[4] if len(argv) == 5 else None)
    print(f"{status}\t{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
