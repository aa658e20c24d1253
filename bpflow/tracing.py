"""OpenTelemetry traces (SPEC §18), only when `OTEL_EXPORTER_OTLP_ENDPOINT` is set: a
span per API request, step (`watch`), worker action and webhook delivery, exported over OTLP/HTTP;
HTTP actions and webhook deliveries carry the W3C `traceparent` of theirs. Unset,
nothing of OpenTelemetry is imported and `span` is a no-op (`make test` proves both).
The SDK is the `otel` extra of pyproject.toml."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
_state: dict[str, Any] = {}  # "tracer", "propagate" once set up
_lock = threading.Lock()


def active() -> bool:
    return "tracer" in _state or bool(os.environ.get(ENDPOINT_ENV))


def setup(exporter: Any = None) -> None:
    """Start tracing to `exporter` (a span exporter; None: OTLP over HTTP to
    `OTEL_EXPORTER_OTLP_ENDPOINT`). Tests pass the SDK's in-memory exporter."""
    from opentelemetry import trace
    from opentelemetry.propagate import inject
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    with _lock:
        provider = TracerProvider(resource=Resource.create({"service.name": "bpflow"}))
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        else:
            provider.add_span_processor(SimpleSpanProcessor(exporter))
        _state.update(tracer=provider.get_tracer("bpflow"), propagate=inject,
                      provider=provider, trace=trace)


def watch(store: Any) -> None:
    """A span per step `store` (a `bpflow.store.Store`) commits, when tracing is on: its
    instance's id; inside the request's or the worker action's span that made it."""
    if active():
        store.on_step_span(span)


def shutdown() -> None:
    """Export what is pending and stop (a process ending)."""
    provider = _state.pop("provider", None)
    _state.clear()
    if provider is not None:
        provider.shutdown()


@contextlib.contextmanager
def span(name: str, **attributes: Any) -> Iterator[Any]:
    """A span named `name` around the block (its attributes: ids, never user text);
    yields it (None when tracing is off) so the block can add attributes."""
    if not active():
        yield None
        return
    if "tracer" not in _state:
        setup()
    with _state["tracer"].start_as_current_span(name, attributes={
            k: v for k, v in attributes.items() if v is not None}) as current:
        yield current


def traceparent() -> dict[str, str]:
    """The headers carrying the current span (`traceparent`), {} when tracing is off."""
    if "tracer" not in _state:
        return {}
    carrier: dict[str, str] = {}
    _state["propagate"](carrier)
    return carrier
