"""What one write costs the API server and etcd, by the form it is sent in.

Starts etcd + kube-apiserver 1.20.2 (``tests/e2e/apiserver.py``), then writes in interleaved
rounds, 64 in flight over one aiohttp session, measuring the API server's, etcd's and this
process's CPU per write (from /proc) for each form:

- ``event-json``: an events.k8s.io/v1 ``Scheduled`` event as kube-scheduler 1.20 writes it
  (client-go ``tools/events``), JSON body, JSON answer: koordsched's form before this bench;
- ``event-json-pbaccept``: the same JSON body, the answer asked for as protobuf;
- ``event-pb``: the body encoded as protobuf (``bench/e2e_protowire.py``), the
  answer protobuf;
- ``event-core-json``: a core/v1 Event (the older API, what kube-scheduler < 1.19 wrote), JSON;
- ``bind-json`` / ``bind-pb``: ``pods/binding`` for pending pods, JSON or protobuf;
- ``bind-json-watched``: ``bind-json`` while a pod watch like ``koordsched run``'s is open (every
  pod but finished ones, JSON, bookmarks) and read: the difference from ``bind-json`` is what
  that watch costs the API server per bound pod.

``--concurrency`` (writes in flight) and ``--pace`` (writes per second, 0 = as fast as they go)
take comma-separated lists whose combinations are interleaved too: the CPU per write is not a
fixed cost, it falls as the rate rises (the API server, etcd and the client each batch more work
per wakeup), so figures are comparable only at the same rate.

Every write must answer 201; at the end every event is read back and counted.

    .venv/bin/python bench/e2e_write_forms.py --writes 3000 --rounds 2
    .venv/bin/python bench/e2e_write_forms.py --writes 1200 --forms event-json --pace 0,200,400,800
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import ssl
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import e2e_protowire as protowire  # noqa: E402
from bench.e2e import NAMESPACE, Api, node_body, pod_body  # noqa: E402
from bench.e2e_measure import proc_cpu  # noqa: E402
from koordsched.backends.kube.timefmt import micro_time  # noqa: E402
from tests.e2e.apiserver import KubeEnv  # noqa: E402

JSON = "application/json"
EVENT_FORMS = ("event-json", "event-json-pbaccept", "event-pb", "event-core-json")
BIND_FORMS = ("bind-json", "bind-pb", "bind-json-watched")
#: koordsched's pod watch (``backends/kube/kinds.py``).
POD_WATCH = "/api/v1/pods?watch=true&allowWatchBookmarks=true&fieldSelector=" + (
    "status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed"
)


def scheduled_event(
    name: str, node: str, uid: str = "", resource_version: str = ""
) -> tuple[dict[str, Any], datetime]:
    """kube-scheduler's events.k8s.io/v1 Scheduled event for pod ``name`` (the bench namespace),
    and its eventTime; ``regarding`` names the pod's uid and resourceVersion when given."""
    at = datetime.now(UTC)
    regarding = {"apiVersion": "v1", "kind": "Pod", "namespace": NAMESPACE, "name": name}
    if uid:
        regarding["uid"] = uid
    if resource_version:
        regarding["resourceVersion"] = resource_version
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{time.time_ns():x}", "namespace": NAMESPACE},
        "eventTime": micro_time(at),
        "reportingController": "koord-scheduler",
        "reportingInstance": "koord-scheduler-bench",
        "action": "Binding",
        "reason": "Scheduled",
        "type": "Normal",
        "note": f"Successfully assigned {NAMESPACE}/{name} to {node}",
        "regarding": regarding,
    }, at


def _core_event(name: str, uid: str, node: str) -> dict[str, Any]:
    now = micro_time()
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{time.time_ns():x}", "namespace": NAMESPACE},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": NAMESPACE,
            "name": name,
            "uid": uid,
        },
        "reason": "Scheduled",
        "message": f"Successfully assigned {NAMESPACE}/{name} to {node}",
        "source": {"component": "koord-scheduler"},
        "firstTimestamp": now[:19] + "Z",
        "lastTimestamp": now[:19] + "Z",
        "count": 1,
        "type": "Normal",
    }


def request_for(form: str, name: str, uid: str, node: str) -> tuple[str, bytes, str, str]:
    """(path, body, content type, accept) for one write of ``form``."""
    if form.startswith("bind"):
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        path = f"/api/v1/namespaces/{NAMESPACE}/pods/{name}/binding"
        if form == "bind-pb":
            return path, protowire.binding(body), protowire.PROTOBUF, protowire.PROTOBUF_ACCEPT
        return path, json.dumps(body).encode(), JSON, JSON
    if form == "event-core-json":
        path = f"/api/v1/namespaces/{NAMESPACE}/events"
        return path, json.dumps(_core_event(name, uid, node)).encode(), JSON, JSON
    path = f"/apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events"
    body, at = scheduled_event(name, node, uid, "12345")
    if form == "event-pb":
        return path, protowire.event(body, at), protowire.PROTOBUF, protowire.PROTOBUF_ACCEPT
    accept = protowire.PROTOBUF_ACCEPT if form == "event-json-pbaccept" else JSON
    return path, json.dumps(body).encode(), JSON, accept


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    import aiohttp

    forms = [f for f in args.forms.split(",") if f]
    unknown = set(forms) - set(EVENT_FORMS) - set(BIND_FORMS)
    if unknown:
        raise SystemExit(f"unknown form(s): {sorted(unknown)}")
    n = args.writes
    widths = [int(w) for w in str(args.concurrency).split(",") if w]
    paces = [float(r) for r in str(args.pace).split(",") if r]
    schedule = [(form, width, pace) for form in forms for width in widths for pace in paces] * args.rounds
    binds = sum(1 for f, _, _ in schedule if f.startswith("bind"))
    env = KubeEnv(etcd_on_tmpfs=True, verbosity=0)
    env.start()
    api = Api(env, 32)
    results: list[dict[str, Any]] = []
    try:
        await api.post(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
        await api.create_all("/api/v1/nodes", [node_body(f"node-{i}") for i in range(args.nodes)])
        await api.create_all(
            f"/api/v1/namespaces/{NAMESPACE}/pods", [pod_body(f"pod-{i}") for i in range(max(binds * n, n))]
        )
        listed = json.loads(await api.get_bytes(f"/api/v1/namespaces/{NAMESPACE}/pods"))
        uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in listed["items"]}
        await asyncio.sleep(2.0)
        assert env._apiserver is not None and env._etcd is not None
        apiserver, etcd = env._apiserver.popen.pid, env._etcd.popen.pid
        ctx = ssl.create_default_context(cafile=str(env.ca_file))
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ctx, limit=max(widths) + 1),
            headers={"Authorization": f"Bearer {env.admin_token}"},
        )
        next_pod = 0
        written = 0
        try:
            for form, width, pace in schedule:
                if form.startswith("bind"):
                    names = [f"pod-{j}" for j in range(next_pod, next_pod + n)]
                    next_pod += n
                else:
                    names = [f"pod-{j}" for j in range(n)]
                    written += n
                it = iter(names)
                watched: list[int] = [0]
                watch_task: asyncio.Task[None] | None = None
                if form == "bind-json-watched":
                    rv = json.loads(await api.get_bytes("/api/v1/pods?limit=1"))["metadata"][
                        "resourceVersion"
                    ]

                    async def watch(rv: str = rv, watched: list[int] = watched) -> None:
                        async with session.get(f"{env.url}{POD_WATCH}&resourceVersion={rv}") as r:
                            async for _line in r.content:
                                watched[0] += 1

                    watch_task = asyncio.ensure_future(watch())
                    await asyncio.sleep(0.2)

                sent = [0]
                t_start = time.monotonic()

                async def worker(
                    form: str = form,
                    it: Any = it,
                    pace: float = pace,
                    sent: list[int] = sent,
                    t_start: float = t_start,
                ) -> None:
                    for name in it:
                        if pace > 0:  # the k-th write of the round goes out no sooner than k / pace
                            sent[0] += 1
                            delay = t_start + sent[0] / pace - time.monotonic()
                            if delay > 0:
                                await asyncio.sleep(delay)
                        path, body, ctype, accept = request_for(
                            form, name, uids[name], f"node-{int(name[4:]) % args.nodes}"
                        )
                        headers = {"Content-Type": ctype, "Accept": accept}
                        async with session.post(env.url + path, data=body, headers=headers) as r:
                            raw = await r.read()
                            if r.status != 201:
                                raise RuntimeError(f"{form}: {r.status}: {raw[:300]!r}")

                measured: Callable[[], tuple[float, float, float]] = lambda: (  # noqa: E731
                    time.process_time(),
                    proc_cpu(apiserver),
                    proc_cpu(etcd),
                )
                c0, t0 = measured(), time.monotonic()
                await asyncio.gather(*(worker() for _ in range(width)))
                if watch_task is not None:
                    for _ in range(100):  # the last binds' events reach the watch
                        if watched[0] >= n:
                            break
                        await asyncio.sleep(0.05)
                c1, t1 = measured(), time.monotonic()
                if watch_task is not None:
                    watch_task.cancel()
                    with contextlib.suppress(BaseException):
                        await watch_task
                    assert watched[0] >= n, f"the watch saw {watched[0]} of {n} binds"
                r = {
                    "form": form,
                    "in_flight": width,
                    "pace": pace,
                    "writes": n,
                    "client_ms": round(1000 * (c1[0] - c0[0]) / n, 3),
                    "apiserver_ms": round(1000 * (c1[1] - c0[1]) / n, 3),
                    "etcd_ms": round(1000 * (c1[2] - c0[2]) / n, 3),
                    "writes_per_s": round(n / (t1 - t0), 1),
                }
                print(json.dumps(r), flush=True)
                results.append(r)
        finally:
            await session.close()
        events = json.loads(await api.get_bytes(f"/apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events"))
        scheduled = [e for e in events["items"] if e.get("reason") == "Scheduled"]
        assert len(scheduled) == written, f"{len(scheduled)} Scheduled events for {written} written"
        pb = [e for e in scheduled if e.get("reportingInstance") == "koord-scheduler-bench"]
        assert all(e["regarding"].get("uid") and e["note"].startswith("Successfully assigned") for e in pb)
    finally:
        await api.close()
        env.stop()
    return results


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--writes", type=int, default=3000, help="writes per round (default 3000)")
    p.add_argument("--nodes", type=int, default=100)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument(
        "--pace",
        default="0",
        help="writes per second (0: as fast as they go); a comma-separated list interleaves",
    )
    p.add_argument("--concurrency", default="64", help="writes in flight; a comma-separated list interleaves")
    p.add_argument("--forms", default=",".join(EVENT_FORMS + BIND_FORMS))
    args = p.parse_args()
    results = asyncio.run(run(args))
    by: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by.setdefault(f"{r['form']}/{r['in_flight']}/{r['pace']:g}", []).append(r)
    print("form/in flight/pace        client  apiserver  etcd  (ms per write, medians)")
    for form, rs in by.items():
        med = {k: statistics.median(r[k] for r in rs) for k in ("client_ms", "apiserver_ms", "etcd_ms")}
        print(f"{form:25} {med['client_ms']:6.3f} {med['apiserver_ms']:10.3f} {med['etcd_ms']:5.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
