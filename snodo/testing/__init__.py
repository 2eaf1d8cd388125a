"""snodo.testing: fault injection for the tests of applications built on snodo (issue 22).

* Servers to run in tests: :func:`serve_http` (a Runtime on 127.0.0.1, in a child process or a
  thread of this one) and :func:`serve_stdio` (a command that runs it as a stdio server), each
  a :class:`ServedRuntime` to kill, stop (SIGSTOP), resume and restart; :func:`server_process`,
  the pid of the stdio server a client started (``servers.py``).
* Owners to crash: :func:`owner` (a thread, greenlet or actor that opens connections and can be
  crashed at a chosen moment), :func:`crash_owner`, :func:`crash_owner_on` (``crashes.py``).
* Leak accounting: :func:`no_leaks`, :class:`LeakReport`, :class:`Leaked` (``leaks.py``).
* The fault proxy: :class:`FaultProxy` (``proxy.py``).
* A pytest plugin, opt in: ``-p snodo.testing.pytest_plugin`` or the ``snodo`` entry point with
  ``--snodo-leak-check`` (``pytest_plugin.py``).

``import snodo`` never imports this package, and this package imports its modules only when a
name is first used (module ``__getattr__``). Decision 0047.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from snodo.testing.crashes import (
        CrashableOwner,
        crash_owner,
        crash_owner_on,
        owner,
    )
    from snodo.testing.leaks import Leaked, LeakReport, no_leaks
    from snodo.testing.proxy import FaultProxy
    from snodo.testing.servers import (
        ServedRuntime,
        serve_http,
        serve_stdio,
        server_process,
        warm_up,
    )

__all__ = [
    "CrashableOwner",
    "FaultProxy",
    "LeakReport",
    "Leaked",
    "ServedRuntime",
    "crash_owner",
    "crash_owner_on",
    "no_leaks",
    "owner",
    "serve_http",
    "serve_stdio",
    "server_process",
    "warm_up",
]

_WHERE = {
    "FaultProxy": "snodo.testing.proxy",
    "LeakReport": "snodo.testing.leaks",
    "Leaked": "snodo.testing.leaks",
    "no_leaks": "snodo.testing.leaks",
    "ServedRuntime": "snodo.testing.servers",
    "serve_http": "snodo.testing.servers",
    "serve_stdio": "snodo.testing.servers",
    "server_process": "snodo.testing.servers",
    "warm_up": "snodo.testing.servers",
    "CrashableOwner": "snodo.testing.crashes",
    "crash_owner": "snodo.testing.crashes",
    "crash_owner_on": "snodo.testing.crashes",
    "owner": "snodo.testing.crashes",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'snodo.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
