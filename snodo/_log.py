"""snodo's loggers: structlog on top of the standard library's logging.

A library must never write to stdout (a stdio server's stdout is its protocol stream), and must
not configure structlog for the application. Each logger wraps ``logging.getLogger(name)`` and
renders ``key=value`` pairs, so output goes wherever the application routes ``logging``.
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

_PROCESSORS: list[Any] = [
    structlog.processors.format_exc_info,
    structlog.processors.KeyValueRenderer(key_order=["event"], drop_missing=True),
]


def get_logger(name: str, **context: Any) -> Any:
    """A structlog logger named ``name`` that logs through ``logging`` (never stdout)."""
    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=_PROCESSORS,
        wrapper_class=structlog.stdlib.BoundLogger,
        **context,
    )
