"""Runs a Model's publication: the Job is created when due, followed, and its result read.

The Job's name carries the fingerprint, so a spec change that alters what is
published makes a new Job, and a Job that exists for the current fingerprint
is followed rather than made again. A failed publication is retried only
when its Job is gone (deleted by hand, or by its TTL after a day): backoff
already spent the Job's own retries.

With ``--publisher-signing-key-secret NS/NAME`` the Job of an admitted Model
signs what it publishes with the Secret's ``signing.key``. A Pod reads
Secrets of its own namespace only, and the key is not copied anywhere, so
only Models in ``NS`` may publish; a Model elsewhere is refused, and a
missing Secret or entry is refused before any Job is made. A Model whose
attestation is not admitted (warn mode) is published unsigned: the
signature says the operator admitted what it published.

Only the Job the operator created is believed: its uid is recorded when it
is created (``status.prefetchOCI.jobUid``, which survives a restart), and a
Job of the right name, owner and fingerprint with another uid (made by
someone who can create Jobs in the namespace) is refused.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from modelseal.errors import Error, InputError, KubeError
from modelseal.operator.kube.api import KubeApi
from modelseal.operator.kube.names import check_label, check_subdomain
from modelseal.operator.prefetch.job import SIGNING_KEY_ENTRY, build_job, job_name
from modelseal.operator.prefetch.publication import (
    FAILED,
    PENDING,
    RUNNING,
    SUCCEEDED,
    JobView,
    Publication,
    finished,
)
from modelseal.operator.prefetch.spec import plan_prefetch, prefetch_fingerprint

__all__ = ["PrefetchJobs", "current_publication"]

_logger = logging.getLogger(__name__)
DOCKERCONFIGJSON = "kubernetes.io/dockerconfigjson"
JobKey = tuple[str, str]


def current_publication(status: Mapping[str, Any]) -> Publication | None:
    """``status.prefetchOCI`` as recorded, if any."""
    found = status.get("prefetchOCI")
    if not isinstance(found, dict) or not isinstance(found.get("phase"), str):
        return None
    files, generation = found.get("files"), found.get("observedGeneration")
    return Publication(
        phase=found["phase"],
        fingerprint=str(found.get("fingerprint") or ""),
        generation=generation if isinstance(generation, int) and not isinstance(generation, bool) else 0,
        job_name=str(found.get("jobName") or ""),
        image=str(found.get("image") or ""),
        files=tuple(str(f) for f in files) if isinstance(files, list) else (),
        message=str(found.get("message") or ""),
        job_uid=str(found.get("jobUid") or ""),
    )


class PrefetchJobs:
    """The publication Jobs of every Model, followed through the API and the Job watch."""

    def __init__(
        self,
        publisher_image: str,
        plain_http: frozenset[str] = frozenset(),
        *,
        allow_plain_http_sources: bool = False,
        signing: tuple[str, str] | None = None,
    ) -> None:
        self.publisher_image = publisher_image
        self.signing = signing  # (namespace, name) of the signing key Secret
        self.plain_http = plain_http
        self.allow_plain_http_sources = allow_plain_http_sources
        self.jobs: dict[JobKey, dict[str, Any]] = {}
        #: whether this replica may create a Job now (leader election: only the leader does)
        self.may_create: Callable[[], bool] = lambda: True
        # the uid of each Job this process created, until the Model's status records it
        self.created: dict[JobKey, str] = {}

    def observe_job(self, namespace: str, name: str, body: Mapping[str, Any] | None) -> None:
        """Record a Job the watch reported (None: deleted)."""
        if body is None:
            self.jobs.pop((namespace, name), None)
        else:
            self.jobs[(namespace, name)] = dict(body)

    async def _push_secret_problem(self, api: KubeApi, namespace: str, spec: Mapping[str, Any]) -> str | None:
        name = str(spec["prefetchOCI"]["pushSecretRef"]["name"])
        try:
            found = await api.secret_type(namespace, name)
        except KubeError as e:
            return f"push secret {namespace}/{name}: {e}"
        if found is None:
            return f"push secret {namespace}/{name} not found"
        kind, keys = found
        if kind != DOCKERCONFIGJSON or ".dockerconfigjson" not in keys:
            return f"push secret {namespace}/{name} is of type {kind or 'unset'}, want {DOCKERCONFIGJSON}"
        return None

    def _signing_namespace_problem(self, namespace: str) -> str | None:
        if self.signing is None or self.signing[0] == namespace:
            return None
        where = "/".join(self.signing)
        return (
            f"the operator signs publications with Secret {where} (--publisher-signing-key-secret), which"
            f" Pods in namespace {namespace} cannot read: publish from namespace {self.signing[0]}"
        )

    async def _signing_secret_problem(self, api: KubeApi) -> str | None:
        assert self.signing is not None
        where = "/".join(self.signing)
        try:  # only the key names are kept: the private key is never held, logged or compared
            found = await api.secret_type(*self.signing)
        except KubeError as e:
            return f"signing key secret {where}: {e}"
        if found is None:
            return f"signing key secret {where} (--publisher-signing-key-secret) not found"
        if SIGNING_KEY_ENTRY not in found[1]:
            return f"signing key secret {where} has no {SIGNING_KEY_ENTRY} entry (a PKCS#8 PEM private key)"
        return None

    async def follow(
        self,
        api: KubeApi,
        model: Mapping[str, Any],
        generation: int,
        *,
        fresh: bool = False,
        admitted: bool = False,
    ) -> Publication:
        """The publication's state now, after creating its Job when one is due.

        ``fresh`` reads the Job from the API rather than the watch's copy;
        ``admitted``: the Model's attestation is admitted, so a Job made now signs.
        """
        meta, spec = model.get("metadata") or {}, model.get("spec") or {}
        namespace, name, uid = (
            str(meta.get("namespace", "")),
            str(meta.get("name", "")),
            str(meta.get("uid", "")),
        )
        fingerprint = prefetch_fingerprint(spec)
        recorded = current_publication(model.get("status") or {})
        if recorded is not None and (recorded.fingerprint, recorded.phase) == (fingerprint, SUCCEEDED):
            return replace(recorded, generation=generation)
        try:
            plans, destination = plan_prefetch(spec, allow_plain_http=self.allow_plain_http_sources)
            check_label(namespace, "the Model's namespace")
            check_subdomain(name, "the Model's name")
            problem = self._signing_namespace_problem(namespace)
            if problem is not None:
                raise InputError(problem)
        except Error as e:
            return Publication(FAILED, fingerprint, generation, message=f"prefetchOCI refused: {e}")
        job = job_name(name, fingerprint)
        ours = self.created.get((namespace, job)) or (
            recorded.job_uid if recorded is not None and recorded.job_name == job else ""
        )
        try:
            body = None if fresh else self.jobs.get((namespace, job))
            if body is None:
                body = await api.read_job(namespace, job)
            if body is None and not self.may_create():
                message = f"waiting for the leader to create Job {job}"
                return Publication(PENDING, fingerprint, generation, job, message=message, job_uid=ours)
            if body is None:
                key_secret = self.signing[1] if self.signing is not None and admitted else None
                problem = await self._push_secret_problem(api, namespace, spec)
                if problem is None and key_secret is not None:
                    problem = await self._signing_secret_problem(api)
                if problem is not None:
                    return Publication(
                        FAILED, fingerprint, generation, message=f"prefetchOCI refused: {problem}"
                    )
                if self.signing is not None and key_secret is None:
                    _logger.warning("Model %s/%s: its attestation is not admitted: its Job will not sign",
                                    namespace, name)  # fmt: skip
                manifest = build_job(model, self.publisher_image, plain_http=self.plain_http,
                                     allow_plain_http_sources=self.allow_plain_http_sources,
                                     signing_secret=key_secret)  # fmt: skip
                body, created = await api.create_job(manifest)
                if created:
                    ours = self.created[(namespace, job)] = JobView.from_object(body).uid
                    _logger.info("Model %s/%s: created publication Job %s", namespace, name, job)
            self.jobs[(namespace, job)] = body
            view = JobView.from_object(body)
            if not ours or view.uid != ours or view.owner_uid != uid or view.fingerprint != fingerprint:
                message = (
                    f"Job {namespace}/{job} exists and is not the Job the operator created for this"
                    " Model's publication; delete it"
                )
                return Publication(FAILED, fingerprint, generation, job, message=message)
            if view.active or not (view.complete or view.failed):
                state, doing = (RUNNING, "is running") if view.active else (PENDING, "is starting")
                return Publication(
                    state, fingerprint, generation, job, message=f"Job {job} {doing}", job_uid=ours
                )
            if recorded is not None and recorded.phase == FAILED and recorded.job_name == job:
                return replace(
                    recorded, generation=generation, job_uid=ours
                )  # final until the Job is deleted
            pods = await api.list_job_pods(namespace, job)
        except KubeError as e:
            return Publication(PENDING, fingerprint, generation, job, message=f"waiting: {e}", job_uid=ours)
        except Error as e:  # the Job could not be built from this spec
            return Publication(FAILED, fingerprint, generation, message=f"prefetchOCI refused: {e}")
        done = finished(view, pods, destination, {p.dest: p.sha256 for p in plans}, generation)
        return replace(done, job_uid=ours)
