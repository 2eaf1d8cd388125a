"""The ratio lines the call benchmarks print (issue 19): snodo / the floor (rates and client CPU
per call) and snodo / each peer, per protocol version, each with its target and ``met`` /
``NOT met``. (The leading underscore keeps run_all from running it.)"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import NamedTuple

__all__ = ["Medians", "gevent_lines", "ratio_lines", "verdict"]


class Medians(NamedTuple):
    """One case's medians over the rounds: calls/s and the client's CPU µs per call."""

    seq: float
    conc: float
    seq_cpu: float
    conc_cpu: float


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def ratio_lines(
    medians: dict[str, Medians],
    cases: Collection[str],
    versions: Sequence[str],
    peers: dict[str, float],
    floor_targets: tuple[float, float],
    cpu_target: float,
) -> list[str]:
    """The ratio lines for ``medians`` (keyed ``"<client> <version>"``, the cases that ran).

    ``cases``: every case the script has (one that did not run gives an ``n/a`` line);
    ``floor_targets``: snodo / floor at least this, (sequential, 16 callers); ``cpu_target``:
    snodo's CPU per call at most this times the floor's, in both shapes; ``peers``: peer -> the
    ratio snodo / peer must reach on both rates (1.0: ahead, strictly)."""
    lines = []
    for version in versions:
        ours, floor = medians.get(f"snodo {version}"), medians.get(f"floor {version}")
        if ours is None or floor is None:
            lines.append(f"ratio snodo {version} / floor {version}: n/a")
        else:
            seq, conc = ours.seq / floor.seq, ours.conc / floor.conc
            lines.append(
                f"ratio snodo {version} / floor {version}: sequential {seq:.2f}x "
                f"(target >= {floor_targets[0]}x: {verdict(seq >= floor_targets[0])}), "
                f"16 callers {conc:.2f}x "
                f"(target >= {floor_targets[1]}x: {verdict(conc >= floor_targets[1])})"
            )
            cpu = (ours.seq_cpu / floor.seq_cpu, ours.conc_cpu / floor.conc_cpu)
            lines.append(
                f"client CPU per call snodo {version} / floor {version}: sequential "
                f"{cpu[0]:.2f}x, 16 callers {cpu[1]:.2f}x "
                f"(target <= {cpu_target:g}x on both: {verdict(max(cpu) <= cpu_target)})"
            )
        for peer in peers:
            name = f"{peer} {version}"
            if name not in cases:
                continue
            theirs = medians.get(name)
            if ours is None or theirs is None:
                lines.append(f"ratio snodo {version} / {name}: n/a")
                continue
            ratios = (ours.seq / theirs.seq, ours.conc / theirs.conc)
            target = peers[peer]
            met = min(ratios) > 1.0 if target == 1.0 else min(ratios) >= target
            wanted = "> 1x" if target == 1.0 else f">= {target:g}x"
            lines.append(
                f"ratio snodo {version} / {name}: sequential {ratios[0]:.2f}x, "
                f"16 callers {ratios[1]:.2f}x (target {wanted} on both: {verdict(met)}); "
                f"client CPU per call {peer} / snodo {theirs.seq_cpu / ours.seq_cpu:.2f}x "
                "sequential"
            )
    return lines


def gevent_lines(medians: dict[str, Medians], versions: Sequence[str]) -> list[str]:
    """snodo under gevent (``"gevent <version>"``: greenlets for the 16 callers) against snodo on
    threads, per version; target: every rate at least the threaded one."""
    lines = []
    for version in versions:
        green, threads = medians.get(f"gevent {version}"), medians.get(f"snodo {version}")
        if green is None or threads is None:
            lines.append(f"ratio snodo gevent {version} / snodo threads {version}: n/a")
            continue
        ratios = (green.seq / threads.seq, green.conc / threads.conc)
        lines.append(
            f"ratio snodo gevent {version} / snodo threads {version}: sequential "
            f"{ratios[0]:.2f}x, 16 callers {ratios[1]:.2f}x (target >= 1x on both: "
            f"{verdict(min(ratios) >= 1.0)}); client CPU per call {green.seq_cpu:.0f} / "
            f"{threads.seq_cpu:.0f} µs sequential"
        )
        bare, bare_threads = medians.get(f"floor-gevent {version}"), medians.get(f"floor {version}")
        if bare is not None and bare_threads is not None:
            lines.append(
                f"  the floor under gevent / on threads {version} (what gevent itself costs): "
                f"sequential {bare.seq / bare_threads.seq:.2f}x, 16 callers "
                f"{bare.conc / bare_threads.conc:.2f}x; client CPU per call {bare.seq_cpu:.0f} / "
                f"{bare_threads.seq_cpu:.0f} µs sequential"
            )
    return lines
