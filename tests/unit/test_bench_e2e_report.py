"""bench/e2e.py's tables: today's scheduler names for older JSON lines, and the headline ratios."""

from __future__ import annotations

from typing import Any

from bench.e2e_report import kind_of, markdown


def run(
    kind: str, pods_per_s: float, sched: float, apiserver: float, etcd: float, **extra: Any
) -> dict[str, Any]:
    return {
        "scheduler": kind,
        "nodes": 1000,
        "pods": 5000,
        "pods_per_s": pods_per_s,
        "cpu_ms_per_pod": {"scheduler": sched, "apiserver": apiserver, "etcd": etcd},
        "ok": True,
        **extra,
    }


def test_lines_from_before_the_binder_keep_their_meaning() -> None:
    # Then "koordsched" ran the reduced profile and "koordsched-bundled" the bundled one.
    assert kind_of({"scheduler": "koordsched"}) == "koordsched-reduced"
    assert kind_of({"scheduler": "koordsched-bundled"}) == "koordsched"
    assert kind_of({"scheduler": "koordsched", "config": "config/koord-scheduler.yaml"}) == "koordsched"
    assert kind_of({"scheduler": "kube-scheduler"}) == "kube-scheduler"


def test_the_headline_is_the_bundled_profile_against_the_binder_and_kube_scheduler() -> None:
    results = [
        run("binder", 1000.0, 0.2, 0.5, 0.3, config=None),
        run("koordsched", 500.0, 1.0, 0.7, 0.3, config="config/koord-scheduler.yaml"),
        run("kube-scheduler", 250.0, 3.0, 0.7, 0.3, config="bench/e2e_profiles/kube-scheduler.yaml"),
        run("koordsched", 900.0, 0.5, 0.5, 0.2),  # an old line: the reduced profile
    ]
    text = markdown(results)
    headline, _, rest = text.partition("\n\n")
    rows = headline.splitlines()
    assert "koordsched pods/s (bundled profile)" in rows[0]
    assert rows[2].split(" | ")[5:] == ["**0.50**", "0.25", "2.00 |"]
    # The reduced profile only beside it, labelled.
    assert "koordsched-reduced" not in headline
    assert "Beside it, labelled" in rest and "| 900 (n=1) | 0.90 |" in rest
    # CPU-bound ratio: the binder's scheduler + apiserver + etcd CPU per pod over each one's.
    cpu_row = next(line for line in rest.splitlines() if line.startswith("| 1,000 | 5,000 | 0.20 / 1.00"))
    assert "1.00 / 2.00 | 0.50" in cpu_row and "3.00 / 4.00 | 0.25" in cpu_row


def test_to_the_last_write_counts_events_that_trail_the_binds() -> None:
    def with_events(
        kind: str, binds: float, all_writes: float, cpu_all: tuple[float, float, float]
    ) -> dict[str, Any]:
        r = run(kind, binds, 0.1, 0.1, 0.1, config=None)
        r["pods_per_s_all_writes"] = all_writes
        r["cpu_ms_per_pod_all_writes"] = dict(zip(("scheduler", "apiserver", "etcd"), cpu_all, strict=True))
        return r

    text = markdown(
        [
            with_events("binder", 1000.0, 1000.0, (0.2, 0.5, 0.3)),
            with_events("koordsched", 600.0, 400.0, (1.0, 2.0, 1.0)),  # its events trail its binds
            with_events("kube-scheduler", 300.0, 300.0, (3.0, 2.0, 1.0)),
            with_events("binder-events", 500.0, 500.0, (0.5, 1.0, 0.5)),
        ]
    )
    block = text.split("To the last write", 1)[1]
    row = next(line for line in block.splitlines() if line.startswith("| 1,000 | 5,000 |"))
    assert row.split(" | ")[-5:] == ["**0.40**", "0.30", "0.80", "0.25", "0.17 |"]
