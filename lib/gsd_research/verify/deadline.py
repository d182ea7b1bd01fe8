"""One deadline for a whole `verify` run: reading, registry look-ups and scoring all draw on it."""

from __future__ import annotations

import copy
import time

# Of --timeout, the share kept for what follows the checks (fencing, scanning, fitting the answer).
FINISH_SHARE = 0.15  # fencing, scanning and fitting 300 claims took about 1 s (bench/verify_deadline.py)
FINISH_MAX = 3.0  # seconds


def clock() -> float:
    """The clock deadlines run on (tests replace it instead of waiting)."""
    return time.monotonic()


class Deadline:
    """`seconds` from its creation; the checks stop a little early so that the answer is still assembled in
    time."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.start = clock()
        self.end = self.start + seconds - min(FINISH_MAX, seconds * FINISH_SHARE)

    def part(self, share: float) -> Deadline:
        """The same deadline ending once `share` of the whole time has passed: a slow source must not leave
        the claims no time to be checked."""
        child = copy.copy(self)
        child.end = min(self.end, self.start + share * self.seconds)
        return child

    def left(self) -> float:
        """Seconds left for checks (never negative)."""
        return max(0.0, self.end - clock())

    def expired(self) -> bool:
        return self.left() <= 0

    @property
    def stop_at(self) -> float:
        """The same end as a time.monotonic() value, for the readers that take one (read.api)."""
        return time.monotonic() + self.left()
