"""A kube-scheduler deployment's flags carried over to ``koordsched run``, against a real API server.

kubeadm's kube-scheduler manifest passes ``--authentication-kubeconfig``,
``--authorization-kubeconfig``, ``--bind-address``, ``--kubeconfig`` and ``--leader-elect=true``;
Helm charts add the leader-election, client and logging flags. With all of them (and
``--config``) the process starts, leads through the Lease the flags name (not the file's), says
in one warning which flags it ignores, and schedules.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.helpers import (
    LEASE_NAMESPACE,
    Api,
    Cluster,
    SchedulerProcess,
    scheduler_processes,
    unique,
    wait_for,
    write_profile,
)

pytestmark = pytest.mark.e2e


async def test_kube_scheduler_flags_start_lead_and_schedule(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path
) -> None:
    await cluster.add_node("n", cpu="8")
    in_file, from_flags = unique("lease-in-file"), unique("lease-from-flags")
    cluster.leases.append((LEASE_NAMESPACE, from_flags))
    config = write_profile(tmp_path / "profile.yaml", lease_name=in_file, lease_duration="60s")
    flags = [
        f"--authentication-kubeconfig={scheduler_kubeconfig}",
        f"--authorization-kubeconfig={scheduler_kubeconfig}",
        "--leader-elect=true",
        f"--leader-elect-resource-name={from_flags}",
        f"--leader-elect-resource-namespace={LEASE_NAMESPACE}",
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=1s",
        "--leader-elect-resource-lock=leases",
        "--kube-api-qps=0.01",
        "--kube-api-burst=1",
        "--profiling=false",
        "--logging-format=text",
        "--log-flush-frequency=5s",
        "--v=2",
        "--pod-max-in-unschedulable-pods-duration=1m",
        "--permit-port-sharing=true",
    ]
    with scheduler_processes() as procs:
        sched = SchedulerProcess("sched-kube-flags", config, scheduler_kubeconfig, tmp_path, extra_args=flags)
        procs.append(sched)
        await sched.wait_ready()

        async def leads() -> bool:
            lease = await api.lease(LEASE_NAMESPACE, from_flags)
            return bool(lease) and lease["spec"].get("holderIdentity") == sched.identity

        await wait_for(leads, what=f"{sched.name} to hold {from_flags}", detail=sched.tail)
        assert await api.lease(LEASE_NAMESPACE, in_file) is None
        # --kube-api-qps=0.01 is ignored under --config: binding is not throttled to one a minute.
        names = [f"p{i}" for i in range(3)]
        for name in names:
            await cluster.add_pod(name, cpu="100m", memory="64Mi")
        try:
            await cluster.wait_bound(names)
        except AssertionError as err:
            raise AssertionError(f"{err}\n{sched.tail()}") from None
        warnings = [line for line in sched.log_text().splitlines() if "kube-scheduler flags" in line]
        assert len(warnings) == 1, sched.tail()
        for name in ("--kube-api-qps", "--kube-api-burst", "--profiling", "--permit-port-sharing=true"):
            assert name in warnings[0], warnings[0]
        assert sched.alive, sched.tail()
