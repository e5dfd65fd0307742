"""Stage 3's answer for one call: the routes it tries, in order, and the model each serves.

A call tries its model's routes whose breakers let it through (``runtime/breaker.py``),
then those of each of the model's ``fallbacks`` the caller's group may use and the job
accepts, in the order configured. When every one of them is shut, it still tries the
route of its own model that failed least recently, rather than refusing outright. The
routes of ``fallbacks_on_context`` are set aside for a refusal of a prompt too long for
the model (``relay``'s ``on_context``).

``Switching`` keeps the job in step with the model of the route being tried: a job keeps
what it needs of its model (``Job.accept``), so it is told of each change of model, and
the runner, once a route answered, makes the call the answering model's (``answered``):
its reply names that model and the meter prices it.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from parley.domain.models import ModelRegistry, Resolved
from parley.errors import ParleyError
from parley.pipeline.authenticate import Caller
from parley.pipeline.call import Call
from parley.pipeline.job import Batches, Job
from parley.pipeline.retries import RetryBudget, RetryPolicy
from parley.pipeline.route import Route, Router
from parley.runtime.breaker import Breakers
from parley.settings import ModelSettings, RoutingSettings

MODEL_HEADER = "x-parley-model"


class Planner:
    """Routes for a call: the router's, past the breakers, then the fallbacks'."""

    def __init__(
        self,
        router: Router,
        breakers: Breakers,
        registry: ModelRegistry,
        models: Iterable[ModelSettings],
        routing: RoutingSettings,
    ) -> None:
        self._router = router
        self._breakers = breakers
        self._registry = registry
        self._max_attempts = routing.max_attempts
        self.budget = RetryBudget(routing)
        self._policy = RetryPolicy(routing.max_attempts, self.budget)
        self.fallbacks: dict[tuple[str, str], int] = {}
        """Calls answered by a fallback, by (model asked for, fallback), for the metrics."""
        self._fallbacks: dict[str, tuple[Resolved, ...]] = {}
        self._on_context: dict[str, tuple[Resolved, ...]] = {}
        for model in models:
            if model.fallbacks:
                self._fallbacks[model.name] = self._resolved(model.fallbacks)
            if model.fallbacks_on_context:
                self._on_context[model.name] = self._resolved(model.fallbacks_on_context)

    def use(self, router: Router) -> None:
        """Route with ``router`` from now on (the channels changed)."""
        self._router = router

    def _resolved(self, names: Iterable[str]) -> tuple[Resolved, ...]:
        found = (self._registry.resolve(name) for name in names)
        return tuple(resolved for resolved in found if resolved is not None)

    def plan(self, call: Call, job: Job) -> tuple[Sequence[Route], RetryPolicy, Switching | None]:
        """The call's routes, its ``RetryPolicy``, and the job wrapper that follows
        changes of model (``None`` when every route is the call's own model's)."""
        self.budget.call()
        name = call.model.spec.name
        own = self._router.routes(name)
        fallbacks = self._fallbacks.get(name, ())
        on_context = self._on_context.get(name, ())
        routes: Sequence[Route] = self._breakers.arrange(own)
        if not fallbacks and not on_context:
            if not routes and own:
                routes = (self._breakers.least_recently_failed(own),)
            return routes, self._policy, None
        usable = _accepted(job, call.model, call.caller, fallbacks)
        context = _accepted(job, call.model, call.caller, on_context)
        planned = list(routes)
        for fallback in usable:
            planned.extend(self._breakers.arrange(self._router.routes(fallback.spec.name)))
        if not planned and own:
            planned.append(self._breakers.least_recently_failed(own))
        context_routes: list[Route] = []
        for model in context:
            context_routes.extend(self._breakers.arrange(self._router.routes(model.spec.name)))
        policy = RetryPolicy(self._max_attempts, self.budget, context_routes)
        switching = (
            Switching(job, call.model, [*usable, *context], self.fallbacks)
            if usable or context
            else None
        )
        return planned, policy, switching


def _accepted(
    job: Job, model: Resolved, caller: Caller, fallbacks: Sequence[Resolved]
) -> list[Resolved]:
    """The fallbacks the caller's group and key may use and ``job`` accepts (then the
    job is given its own model back)."""
    if not fallbacks:
        return []
    usable: list[Resolved] = []
    for fallback in fallbacks:
        if not caller.may_use(fallback.spec.name):
            continue
        try:
            job.accept(fallback)
        except ParleyError:
            continue
        usable.append(fallback)
    job.accept(model)
    return usable


class Switching:
    """A job's ``call`` and ``open``, telling the job first when the route serves another
    model than the last one tried."""

    __slots__ = ("_counts", "_current", "_job", "_models")

    def __init__(
        self,
        job: Any,
        model: Resolved,
        fallbacks: Sequence[Resolved],
        counts: dict[tuple[str, str], int],
    ) -> None:
        self._job = job
        self._counts = counts
        self._current = model
        self._models = {m.spec.name: m for m in (model, *fallbacks)}

    def _switch(self, route: Route) -> None:
        if route.model != self._current.spec.name and route.model in self._models:
            self._current = self._models[route.model]
            self._job.accept(self._current)

    def call(self, route: Route) -> Any:
        self._switch(route)
        return self._job.call(route)

    def open(self, route: Route) -> AbstractAsyncContextManager[Batches[Any]]:
        self._switch(route)
        opened: AbstractAsyncContextManager[Batches[Any]] = self._job.open(route)
        return opened

    def answered(self, call: Call, headers: MutableMapping[str, str]) -> None:
        """The route that answered served ``self._current``: make it the call's model."""
        asked, answered = call.model.spec.name, self._current.spec.name
        if answered != asked:
            call.model = self._current
            headers[MODEL_HEADER] = answered
            self._counts[asked, answered] = self._counts.get((asked, answered), 0) + 1
