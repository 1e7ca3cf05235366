"""The no-decision binder: how fast this API server binds pods when nobody thinks about them.

``bench/e2e.py`` runs it as one of its schedulers (``--schedulers binder,...``), in its own
process like the others, so that the API server's ceiling is measured on the same machine in
the same run as the schedulers it is compared with. It lists the nodes and the pending pods of
one schedulerName, watches for more, and POSTs ``pods/binding`` for each pod to the nodes in
turn (round-robin, no filter, no score), ``--in-flight`` requests at a time over kept-alive
connections. It writes no events and no status: the least work a scheduler's writes can be.

With ``--events`` (the bench's ``binder-events``, a diagnostic) each bind is followed by the
``Scheduled`` event kube-scheduler writes (events.k8s.io/v1, one POST per pod): the ceiling for
a scheduler that writes every event.

    BINDER_TOKEN=T python bench/e2e_binder.py --server URL --ca ca.crt [--in-flight 64]

It runs until SIGTERM/SIGINT and prints what it did to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import ssl
import sys
import time

import aiohttp
import msgspec


class _Meta(msgspec.Struct):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""


class _Spec(msgspec.Struct):
    nodeName: str = ""
    schedulerName: str = ""


class _Obj(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    spec: _Spec = msgspec.field(default_factory=_Spec)


class _List(msgspec.Struct):
    metadata: _Meta
    items: list[_Obj] | None = None


class _Event(msgspec.Struct):
    type: str
    object: _Obj


class _BindMeta(msgspec.Struct):
    name: str
    namespace: str
    uid: str


class _Target(msgspec.Struct):
    name: str
    apiVersion: str = "v1"
    kind: str = "Node"


class _Binding(msgspec.Struct):
    metadata: _BindMeta
    target: _Target
    apiVersion: str = "v1"
    kind: str = "Binding"


class _Regarding(msgspec.Struct):
    namespace: str
    name: str
    uid: str
    apiVersion: str = "v1"
    kind: str = "Pod"


class _EventMeta(msgspec.Struct):
    name: str
    namespace: str


class _ScheduledEvent(msgspec.Struct):
    metadata: _EventMeta
    eventTime: str
    reportingController: str
    reportingInstance: str
    note: str
    regarding: _Regarding
    action: str = "Binding"
    reason: str = "Scheduled"
    type: str = "Normal"
    apiVersion: str = "events.k8s.io/v1"
    kind: str = "Event"


_decode_list = msgspec.json.Decoder(_List).decode
_decode_event = msgspec.json.Decoder(_Event).decode
_encode = msgspec.json.Encoder().encode


class Binder:
    def __init__(self, args: argparse.Namespace) -> None:
        self.base = args.server.rstrip("/")
        self.scheduler_name = args.scheduler_name
        self.in_flight = args.in_flight
        self.events = args.events
        self.instance = f"{args.scheduler_name}-binder"
        ctx = ssl.create_default_context(cafile=args.ca)
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ctx, limit=args.in_flight + 4),
            headers={"Authorization": f"Bearer {args.token}", "Content-Type": "application/json"},
            timeout=aiohttp.ClientTimeout(total=30),
        )
        self.queue: asyncio.Queue[_Obj] = asyncio.Queue()
        self.seen: set[str] = set()
        self.nodes: list[str] = []
        self.next_node = 0
        self.bound = 0
        self.failed = 0

    def offer(self, pod: _Obj) -> None:
        if pod.spec.nodeName or pod.spec.schedulerName != self.scheduler_name:
            return
        if pod.metadata.uid in self.seen:
            return
        self.seen.add(pod.metadata.uid)
        self.queue.put_nowait(pod)

    async def get(self, path: str) -> bytes:
        async with self.session.get(self.base + path) as resp:
            body = await resp.read()
            if resp.status != 200:
                raise RuntimeError(f"GET {path}: HTTP {resp.status}: {body[:300]!r}")
            return body

    async def bind(self, pod: _Obj) -> None:
        node = self.nodes[self.next_node % len(self.nodes)]
        self.next_node += 1
        m = pod.metadata
        body = _encode(_Binding(_BindMeta(m.name, m.namespace, m.uid), _Target(node)))
        path = f"{self.base}/api/v1/namespaces/{m.namespace}/pods/{m.name}/binding"
        try:
            async with self.session.post(path, data=body) as resp:
                await resp.read()
                if resp.status not in (200, 201):
                    self.failed += 1
                    print(f"binder: {m.namespace}/{m.name}: HTTP {resp.status}", file=sys.stderr)
                    return
            self.bound += 1
            if self.events:
                await self.event(pod, node)
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.failed += 1
            print(f"binder: {m.namespace}/{m.name}: {type(exc).__name__}: {exc}", file=sys.stderr)

    async def event(self, pod: _Obj, node: str) -> None:
        m = pod.metadata
        now = time.time()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"
        body = _encode(
            _ScheduledEvent(
                _EventMeta(f"{m.name}.{time.time_ns():x}", m.namespace),
                stamp,
                self.scheduler_name,
                self.instance,
                f"Successfully assigned {m.namespace}/{m.name} to {node}",
                _Regarding(m.namespace, m.name, m.uid),
            )
        )
        path = f"{self.base}/apis/events.k8s.io/v1/namespaces/{m.namespace}/events"
        async with self.session.post(path, data=body) as resp:
            await resp.read()
            if resp.status != 201:
                self.failed += 1
                print(f"binder: event for {m.namespace}/{m.name}: HTTP {resp.status}", file=sys.stderr)

    async def worker(self) -> None:
        while True:
            await self.bind(await self.queue.get())

    async def watch(self, rv: str) -> None:
        params = {"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true"}
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
        while True:
            async with self.session.get(f"{self.base}/api/v1/pods", params=params, timeout=timeout) as resp:
                if resp.status != 200:
                    raise RuntimeError(f"watch pods: HTTP {resp.status}")
                async for line in resp.content:
                    if not line.strip():
                        continue
                    ev = _decode_event(line)
                    if ev.type == "ERROR":  # 410: the bench's pods were all listed; start over
                        raise RuntimeError("watch pods: expired")
                    params["resourceVersion"] = (
                        ev.object.metadata.resourceVersion or params["resourceVersion"]
                    )
                    if ev.type in ("ADDED", "MODIFIED"):
                        self.offer(ev.object)

    async def run(self, stop: asyncio.Event) -> None:
        t0 = time.monotonic()
        nodes = _decode_list(await self.get("/api/v1/nodes"))
        self.nodes = sorted(n.metadata.name for n in nodes.items or ())
        if not self.nodes:
            raise RuntimeError("no nodes")
        pods = _decode_list(await self.get("/api/v1/pods?fieldSelector=spec.nodeName%3D"))
        for pod in pods.items or ():
            self.offer(pod)
        print(
            f"binder: {len(self.nodes)} nodes, {self.queue.qsize()} pending pods listed in "
            f"{time.monotonic() - t0:.2f}s; {self.in_flight} binds in flight",
            file=sys.stderr,
            flush=True,
        )
        tasks = [asyncio.create_task(self.watch(pods.metadata.resourceVersion))]
        tasks += [asyncio.create_task(self.worker()) for _ in range(self.in_flight)]
        try:
            await stop.wait()
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.session.close()
            print(f"binder: {self.bound} bound, {self.failed} failed", file=sys.stderr, flush=True)


async def amain(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    binder = Binder(args)
    runner = asyncio.create_task(binder.run(stop))
    with contextlib.suppress(asyncio.CancelledError):
        await runner
    return 0 if binder.failed == 0 else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", required=True, help="the API server's URL")
    p.add_argument(
        "--token",
        default=os.environ.get("BINDER_TOKEN", ""),
        help="a bearer token allowed to list/watch pods and bind (default: $BINDER_TOKEN)",
    )
    p.add_argument("--ca", required=True, help="the CA bundle that verifies the server")
    p.add_argument("--scheduler-name", default="koord-scheduler", help="bind the pods of this schedulerName")
    p.add_argument("--in-flight", type=int, default=64, help="bindings in flight (default 64)")
    p.add_argument("--events", action="store_true", help="write a Scheduled event after each bind")
    args = p.parse_args()
    if not args.token:
        p.error("no token: pass --token or set BINDER_TOKEN")
    return asyncio.run(amain(args))


if __name__ == "__main__":
    sys.exit(main())
