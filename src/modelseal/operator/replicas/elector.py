"""Leader election by a Lease, as client-go's ``leaderelection`` elects Kubernetes' own controllers.

Every :data:`Timings.retry` seconds a replica reads the Lease and, when it may,
writes it naming itself: it renews a Lease it holds, takes a free one
(``holderIdentity`` empty: released) at once, and takes one someone else holds only
when that record has not changed for ``lease`` seconds *by this replica's own
monotonic clock*, counted from when it last saw the record change. The holder's
``renewTime`` is never compared with this clock, so a skewed clock elsewhere can
neither hand the Lease over early nor hold it forever. Every write is preconditioned
on the ``resourceVersion`` read: of two replicas racing, one gets 409 and stays a
candidate.

The holder writes only until its renew deadline: :data:`Timings.renew` seconds
after the start of its last successful renewal, checked by the monotonic clock
before every write (:meth:`Elector.leads`), not only in this loop; that clock counts time the
machine spent suspended (``CLOCK_BOOTTIME``), so a paused leader wakes up past its deadline. Since every
other replica waits ``lease`` seconds from a change it saw after that renewal
started, the holder has stopped writing at least ``lease - renew`` seconds before
anyone else may start. A record that names someone else stops it at once. On an
orderly exit it releases the Lease (empty holder, a one-second duration, as
client-go's ``ReleaseOnCancel``) so another takes over within a retry.

Where this is stricter than client-go: a deleted Lease is created again only by
its holder, or by a candidate once the record it last saw has expired (client-go
creates it at once, and may then have two writers until the holder's deadline);
and a record is this replica's only if this process sent it, not because it
names this identity (client-go renews any record with its name, so two replicas
given the same identity both write). A Pod's restarted process therefore waits
out its previous one's record, as the other replicas do.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from modelseal.errors import KubeError
from modelseal.operator.kube.client import KubeClient
from modelseal.operator.kube.lease import (
    Lease,
    LeaseConflictError,
    LeaseRecord,
    create_lease,
    micro_time,
    read_lease,
    update_lease,
)
from modelseal.text import one_line

__all__ = ["CLIENT_GO", "OPERATOR", "STEADY", "Elector", "Timings"]

_logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Timings:
    """client-go's defaults for its controllers: ``leaseDurationSeconds`` 15, renew deadline 10 s,
    retry period 2 s; a candidate's retries are spread by up to ``jitter`` of a period."""

    lease: float = 15.0
    renew: float = 10.0
    retry: float = 2.0
    jitter: float = 0.2


CLIENT_GO = Timings()
#: the operator's own: a crashed leader's writes are taken over within 15 s (issue 30) where
#: client-go's 15 s Lease takes up to 17.4 s; the holder still stops writing 3 s before anyone
#: else may start, and renews 4 times within its deadline
OPERATOR = Timings(lease=10.0, renew=7.0, retry=1.5)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _boottime() -> float:
    """Seconds on a clock that never goes back and, unlike ``time.monotonic`` on Linux, counts the
    time the machine was suspended: a leader whose VM was paused past its deadline must not wake up
    believing it still leads."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


STEADY: Callable[[], float] = _boottime if hasattr(time, "CLOCK_BOOTTIME") else time.monotonic


class Elector:
    """One replica's part in the election for one Lease."""

    def __init__(
        self,
        lease: tuple[str, str],
        identity: str,
        client: Callable[[], KubeClient | None],
        *,
        timings: Timings = CLIENT_GO,
        on_lead: Callable[[], None] = lambda: None,
        monotonic: Callable[[], float] = STEADY,
        wall: Callable[[], datetime] = _utcnow,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.namespace, self.name = lease
        self.identity = identity
        self.timings = timings
        self._client, self._on_lead = client, on_lead
        self._monotonic, self._wall, self._rng = monotonic, wall, rng
        self._deadline: float | None = None  # while leading: writes stop at this monotonic time
        self._leading = False  # what was last logged
        self._lease: Lease | None = None  # the last version read or written
        self._seen: str | None = None  # the record as last seen, and when it was first seen so
        self._seen_at = 0.0
        self._failing: str | None = None
        self._ours: list[LeaseRecord] = []  # the records this process last sent: only those are its own
        self._twin = False  # a record naming this identity that this process did not write was seen

    @property
    def where(self) -> str:
        return f"Lease {self.namespace}/{self.name}"

    def leads(self) -> bool:
        """Whether this replica may write now: it holds the Lease and its renew deadline has not passed."""
        return self._deadline is not None and self._monotonic() < self._deadline

    def left(self) -> float:
        """The seconds until the renew deadline (0 when this replica does not lead): how long a write
        may still take to be sent."""
        return max(0.0, self._deadline - self._monotonic()) if self._deadline is not None else 0.0

    def _observe(self, lease: Lease) -> None:
        if lease.seen != self._seen:
            self._seen, self._seen_at = lease.seen, self._monotonic()

    def _expired(self) -> bool:
        """Whether the record last seen has not changed for a lease duration (this replica's clock)."""
        return self._seen is None or self._monotonic() >= self._seen_at + self.timings.lease

    def _stop(self, why: str) -> None:
        self._deadline = None
        if self._leading:
            self._leading = False
            _logger.warning("lost the %s: stopped writing (%s)", self.where, why)

    def check(self) -> None:
        """Log the loss of the Lease once its renew deadline passed (writes stopped then already)."""
        if self._leading and not self.leads():
            self._stop(f"not renewed within {self.timings.renew:g}s")

    async def try_once(self) -> bool:
        """One round: read the Lease and take or renew it when this replica may; whether it leads after."""
        client = self._client()
        if client is None:  # not logged in yet
            return False
        started = self._monotonic()
        try:
            lease = await read_lease(client, self.namespace, self.name)
            if lease is None:
                # gone: its holder creates it again; anyone else waits for what it last saw to expire
                free = self._lease is not None and not self._lease.record.holder
                if not (self._leading or free or self._expired()):
                    return False
                written = await create_lease(client, self.namespace, self.name, self._record(None))
            else:
                self._lease = lease
                self._observe(lease)
                holder = lease.record.holder
                if holder and not self._mine(lease):
                    self._stop(self._foreign(holder))
                    if not self._expired():
                        return False
                written = await update_lease(client, lease, self._record(lease))
        except LeaseConflictError as e:
            _logger.info("%s: lost the race (%s)", self.where, e)
            return False
        except KubeError as e:
            if self._failing != str(e):  # once per kind of failure, not every two seconds
                _logger.warning("%s: %s", self.where, e)
            self._failing = str(e)
            return False
        self._failing = None
        self._renewed(started, written)
        return True

    def _mine(self, lease: Lease) -> bool:
        """Whether this process wrote the record (the identity alone is not enough: a twin given the same
        identity, or this Pod's previous process, wrote it otherwise)."""
        return lease.malformed is None and lease.record in self._ours

    def _foreign(self, holder: str) -> str:
        if holder != self.identity:
            return f"the Lease now names {one_line(holder, 100)}"
        if not self._twin:
            self._twin = True
            _logger.warning(
                "%s names this replica's identity %s but was not written by this process: another replica"
                " has the same --leader-elect-identity, or this Pod's previous process held it; it is"
                " waited out as any other holder", self.where, self.identity,
            )  # fmt: skip
        return "the Lease was written by another process with this identity"

    def _record(self, lease: Lease | None) -> LeaseRecord:
        record = self._compute(lease)
        self._ours = [*self._ours[-1:], record]  # sent: if its answer is lost, it is still this one's
        return record

    def _compute(self, lease: Lease | None) -> LeaseRecord:
        now = micro_time(self._wall())
        duration = int(self.timings.lease)
        if lease is None:
            return LeaseRecord(self.identity, duration, now, now, 0)
        old = lease.record
        if self._mine(lease):
            return LeaseRecord(self.identity, duration, old.acquired or now, now, old.transitions)
        return LeaseRecord(self.identity, duration, now, now, min(old.transitions + 1, 2**31 - 1))

    def _renewed(self, started: float, written: Lease) -> None:
        self._lease = written
        self._observe(written)
        self._deadline = started + self.timings.renew
        if not self._leading and self.leads():
            self._leading = True
            _logger.info("became the leader (%s, identity %s)", self.where, self.identity)
            self._on_lead()

    def pause(self) -> float:
        """How long to wait before the next round: a retry period (a candidate's spread by jitter),
        cut short to wake at the renew deadline or when the record last seen expires."""
        now, t = self._monotonic(), self.timings
        if self._deadline is not None:
            return max(0.0, min(t.retry, self._deadline - now))
        wait = t.retry * (1 + t.jitter * self._rng())
        if self._seen is not None and self._seen_at + t.lease > now:
            wait = min(wait, self._seen_at + t.lease - now + 0.01)
        return max(0.0, wait)

    async def run(self) -> None:
        """Take part until cancelled."""
        while True:
            try:
                await self.try_once()
            except Exception:  # a bug, not the API: fail closed (stop writing) and go on trying
                self._stop("an unexpected error in the election")
                _logger.exception("%s: the election round failed", self.where)
            self.check()
            await asyncio.sleep(self.pause())
            self.check()

    async def release(self) -> None:
        """Stop writing, then give the Lease up if this replica holds it (an orderly exit). Never raises."""
        held, lease = self.leads(), self._lease
        self._deadline, self._leading = None, False
        client = self._client()
        if not held or lease is None or client is None or not self._mine(lease):
            return
        now = micro_time(self._wall())
        record = LeaseRecord("", 1, now, now, lease.record.transitions)
        try:
            try:
                await update_lease(client, lease, record)
            except LeaseConflictError:  # a renewal cancelled after it was sent: read what it wrote
                fresh = await read_lease(client, self.namespace, self.name)
                if fresh is None or not self._mine(fresh):
                    return
                await update_lease(client, fresh, record)
        except KubeError as e:
            _logger.warning("%s: not released: %s", self.where, e)
            return
        _logger.info("released the %s", self.where)
