"""``MODULE:ATTR``: how ``python -m snodo.server`` finds the Runtime it serves."""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from typing import Any, Final

from snodo.server.runtime import Runtime

__all__ = ["EXIT_USAGE", "TargetError", "load_or_report", "load_runtime"]

#: Exit status for a bad ``MODULE:ATTR`` (and bad command-line usage).
EXIT_USAGE: Final = 2


class TargetError(Exception):
    """``MODULE:ATTR`` does not name a Runtime (or a callable returning one)."""


def load_runtime(target: str) -> Runtime:
    """The Runtime ``MODULE:ATTR`` names: ``ATTR`` (dotted) is a Runtime or a zero-argument
    callable returning one. The current directory is importable, as under ``python -m``."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise TargetError(
            f"expected MODULE:ATTR (for example mypkg.server:runtime), got {target!r}"
        )
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            raise TargetError(
                f"no module named {missing!r} (searched sys.path, current directory {cwd} included)"
            ) from None
        raise TargetError(
            f"importing {module_name!r} failed:\n{traceback.format_exc().rstrip()}"
        ) from None
    except Exception:
        raise TargetError(
            f"importing {module_name!r} failed:\n{traceback.format_exc().rstrip()}"
        ) from None
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise TargetError(f"module {module_name!r} has no attribute {attr!r}") from None
    if isinstance(obj, Runtime):
        return obj
    if not callable(obj):
        raise TargetError(
            f"{target} is {type(obj).__name__!s}, not a Runtime or a zero-argument callable "
            "returning one"
        )
    try:
        made = obj()
    except Exception:
        raise TargetError(
            f"calling {target}() failed:\n{traceback.format_exc().rstrip()}"
        ) from None
    if not isinstance(made, Runtime):
        raise TargetError(f"{target}() returned {type(made).__name__}, not a Runtime")
    return made


def load_or_report(target: str) -> Runtime | None:
    """:func:`load_runtime`, or ``None`` once the reason it failed is on stderr."""
    try:
        return load_runtime(target)
    except TargetError as exc:
        print(f"snodo.server: error: {exc}", file=sys.stderr, flush=True)
        return None
