"""Authorization failures: ``McpError(kind="authorization")`` naming the failed step."""

from __future__ import annotations

from typing import Any

from snodo.protocol.errors import CONNECTION_CLOSED, McpError

__all__ = ["auth_error"]


def auth_error(step: str, reason: str, *, detail: Any = None) -> McpError:
    """-32000 with ``kind="authorization"``, ``cause=("authorization", step, detail)`` and a
    message naming ``step``; callers never pass a token, code or secret in ``reason``."""
    return McpError(
        CONNECTION_CLOSED,
        f"Authorization failed at {step}: {reason}",
        kind="authorization",
        cause=("authorization", step, detail),
    )
