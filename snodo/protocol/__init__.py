"""The sans-IO protocol layer: pure functions and frozen records, no threads, sockets or clocks."""

__all__: list[str] = []
