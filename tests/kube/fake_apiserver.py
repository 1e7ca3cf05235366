"""A small in-memory API server on 127.0.0.1, enough to test the kube backend's protocol handling.

It is deliberately simple (no admission, no field selectors, no protobuf); real behaviour is
for the e2e suite against a real kube-apiserver. What it does model, the backend relies on:

* lists with ``limit``/``continue`` and a list ``resourceVersion``; history "compaction", after
  which a watch (or an exact list) from an older RV gets 410, as an HTTP status or as an
  in-stream ``ERROR`` event;
* newline-delimited watch streams replaying history after the given RV, then live events,
  bookmarks on demand;
* ``pods/binding`` answering 201 with a ``Status`` (as the real server does) or 409;
* pod status patches, events.k8s.io/v1 events, and Leases with optimistic concurrency;
* MicroTime fields checked with the server's fixed layout (422 otherwise);
* injected faults per method and path, and requests left unanswered until the server stops;
* the core and apps collections every cluster serves and plugins read (Namespaces, Services,
  ReplicationControllers, ReplicaSets, StatefulSets), empty until a test adds to them.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
import re
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.builders import node_manifest, pod_manifest

MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")

PODS = "/api/v1/pods"
NODES = "/api/v1/nodes"
PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"
NAMESPACES = "/api/v1/namespaces"
SERVICES = "/api/v1/services"
REPLICATION_CONTROLLERS = "/api/v1/replicationcontrollers"
REPLICA_SETS = "/apis/apps/v1/replicasets"
STATEFUL_SETS = "/apis/apps/v1/statefulsets"
POD_DISRUPTION_BUDGETS = "/apis/policy/v1/poddisruptionbudgets"
STORAGE_CLASSES = "/apis/storage.k8s.io/v1/storageclasses"
PERSISTENT_VOLUMES = "/api/v1/persistentvolumes"
PERSISTENT_VOLUME_CLAIMS = "/api/v1/persistentvolumeclaims"
CSI_NODES = "/apis/storage.k8s.io/v1/csinodes"
CSI_DRIVERS = "/apis/storage.k8s.io/v1/csidrivers"
CONFIG_MAPS = "/api/v1/configmaps"

_NAMESPACED = {
    PODS: True,
    NODES: False,
    PRIORITY_CLASSES: False,
    NAMESPACES: False,
    SERVICES: True,
    REPLICATION_CONTROLLERS: True,
    REPLICA_SETS: True,
    STATEFUL_SETS: True,
    POD_DISRUPTION_BUDGETS: True,
    STORAGE_CLASSES: False,
    PERSISTENT_VOLUMES: False,
    PERSISTENT_VOLUME_CLAIMS: True,
    CSI_NODES: False,
    CSI_DRIVERS: False,
    CONFIG_MAPS: True,
}
_KINDS = {
    PODS: "Pod",
    NODES: "Node",
    PRIORITY_CLASSES: "PriorityClass",
    NAMESPACES: "Namespace",
    SERVICES: "Service",
    REPLICATION_CONTROLLERS: "ReplicationController",
    REPLICA_SETS: "ReplicaSet",
    STATEFUL_SETS: "StatefulSet",
    POD_DISRUPTION_BUDGETS: "PodDisruptionBudget",
    STORAGE_CLASSES: "StorageClass",
    PERSISTENT_VOLUMES: "PersistentVolume",
    PERSISTENT_VOLUME_CLAIMS: "PersistentVolumeClaim",
    CSI_NODES: "CSINode",
    CSI_DRIVERS: "CSIDriver",
    CONFIG_MAPS: "ConfigMap",
}


def _merged(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merged(out.get(k), v)
    return out


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure" if code >= 300 else "Success",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _json(code: int, body: Any) -> web.Response:
    return web.Response(status=code, body=json.dumps(body).encode(), content_type="application/json")


@dataclass
class Fault:
    method: str
    path: str
    status: int
    times: int
    watch: bool | None = None
    message: str = "injected fault"


@dataclass
class Stall:
    method: str
    path: str
    times: int
    #: Apply the request first, then leave it unanswered (the answer is lost, the write is not).
    after: bool = False


@dataclass
class Collection:
    path: str
    namespaced: bool
    kind: str
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    watchers: set[asyncio.Queue[tuple[str, dict[str, Any]] | None]] = field(default_factory=set)

    def key(self, obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        return f"{meta.get('namespace', '')}/{meta['name']}" if self.namespaced else meta["name"]


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    content_type: str


class FakeApiServer:
    def __init__(self) -> None:
        self.rv = 100
        self.compacted_rv = 0
        #: "http": a watch from a compacted RV gets HTTP 410; "stream": a 200 with an ERROR event.
        self.gone_mode = "http"
        self.collections = {p: Collection(p, _NAMESPACED[p], _KINDS[p]) for p in _NAMESPACED}
        self.requests: list[Recorded] = []
        self.faults: list[Fault] = []
        self.stalls: list[Stall] = []
        self._unstall = asyncio.Event()
        self.events: dict[str, dict[str, Any]] = {}
        self.event_patches: list[dict[str, Any]] = []
        self.leases: dict[str, dict[str, Any]] = {}
        self._uids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self.port = 0
        #: The Eviction versions pods/eviction takes; discovery names the last (1.20: v1beta1 only,
        #: 1.22-1.24: both, v1 named; 1.25 on: v1 only). Empty: no pods/eviction in discovery.
        self.eviction_versions: tuple[str, ...] = ("v1beta1", "v1")

    # --- lifecycle -----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self._runner = runner
        self.port = int(runner.addresses[0][1])

    async def stop(self) -> None:
        self.close_watches()
        self._unstall.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # --- state changes (the test drives these) -------------------------------------------------

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def _emit(self, coll: Collection, type_: str, obj: dict[str, Any]) -> None:
        coll.history.append((self.rv, type_, copy.deepcopy(obj)))
        for q in coll.watchers:
            q.put_nowait((type_, copy.deepcopy(obj)))

    def add(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        coll = self.collections[path]
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", f"uid-{next(self._uids)}")
        meta["resourceVersion"] = self._next_rv()
        coll.objects[coll.key(obj)] = obj
        self._emit(coll, "ADDED", obj)
        return obj

    def modify(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        coll = self.collections[path]
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = self._next_rv()
        coll.objects[coll.key(obj)] = obj
        self._emit(coll, "MODIFIED", obj)
        return obj

    def delete(self, path: str, key: str) -> None:
        coll = self.collections[path]
        obj = coll.objects.pop(key)
        obj["metadata"]["resourceVersion"] = self._next_rv()
        self._emit(coll, "DELETED", obj)

    def get(self, path: str, key: str) -> dict[str, Any]:
        return self.collections[path].objects[key]

    def silently(
        self, path: str, *, add: list[dict[str, Any]] | None = None, delete: list[str] | None = None
    ) -> None:
        """Change state without any watch event, as if the events were lost (then compact)."""
        coll = self.collections[path]
        for key in delete or ():
            coll.objects.pop(key)
        for obj in add or ():
            obj = copy.deepcopy(obj)
            obj.setdefault("metadata", {}).setdefault("uid", f"uid-{next(self._uids)}")
            obj["metadata"]["resourceVersion"] = self._next_rv()
            coll.objects[coll.key(obj)] = obj

    def compact(self) -> None:
        """Forget history: watching from any RV seen so far now answers 410.

        The global RV moves on first, as other writes would move etcd's revision.
        """
        self.rv += 1
        self.compacted_rv = self.rv
        for coll in self.collections.values():
            coll.history.clear()

    def bookmark(self, path: str) -> str:
        rv = self._next_rv()
        for q in self.collections[path].watchers:
            q.put_nowait(("BOOKMARK", {"kind": _KINDS[path], "metadata": {"resourceVersion": rv}}))
        return rv

    def stream_error(self, path: str, code: int, message: str) -> None:
        for q in self.collections[path].watchers:
            q.put_nowait(("ERROR", status(code, "Expired" if code == 410 else "InternalError", message)))

    def close_watches(self) -> None:
        for coll in self.collections.values():
            for q in coll.watchers:
                q.put_nowait(None)

    def watchers(self, path: str) -> int:
        return len(self.collections[path].watchers)

    def fail(
        self, method: str, path: str, status_code: int, times: int = 1, *, watch: bool | None = None
    ) -> None:
        self.faults.append(Fault(method, path, status_code, times, watch))

    def stall(self, method: str, path: str, times: int = 1, *, after: bool = False) -> None:
        """Leave the next ``times`` such requests unanswered until the server stops (a hung server).

        ``after``: apply each first, so the write is done but its answer never comes.
        """
        self.stalls.append(Stall(method, path, times, after))

    def requests_to(self, method: str, path: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method and r.path == path]

    # --- HTTP ----------------------------------------------------------------------------------

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = json.loads(raw) if raw else None
        query = dict(request.query)
        path = request.path
        self.requests.append(
            Recorded(request.method, path, query, body, request.headers.get("Content-Type", ""))
        )
        is_watch = query.get("watch") in ("true", "True", "1")
        for fault in self.faults:
            if fault.times > 0 and fault.method == request.method and fault.path == path:
                if fault.watch is not None and fault.watch != is_watch:
                    continue
                fault.times -= 1
                return _json(fault.status, status(fault.status, "InternalError", fault.message))
        for stall in self.stalls:
            if stall.times > 0 and stall.method == request.method and stall.path == path:
                stall.times -= 1
                if stall.after:
                    self._route(request.method, path, body, request.headers.get("Content-Type", ""))
                await self._unstall.wait()
                return _json(503, status(503, "ServiceUnavailable", "stalled"))
        if request.method == "GET" and path in self.collections:
            if is_watch:
                return await self._watch(request, self.collections[path], query)
            return self._list(self.collections[path], query)
        return self._route(request.method, path, body, request.headers.get("Content-Type", ""))

    def _list(self, coll: Collection, query: dict[str, str]) -> web.Response:
        rv = query.get("resourceVersion", "")
        cont = query.get("continue", "")
        if rv and rv != "0" and int(rv) < self.compacted_rv:
            return _json(410, status(410, "Expired", f"too old resource version: {rv} ({self.rv})"))
        keys = sorted(coll.objects)
        start = 0
        if cont:
            start_s, _, cont_rv = cont.partition(":")
            if int(cont_rv) < self.compacted_rv:
                return _json(410, status(410, "Expired", "continue token expired"))
            start = int(start_s)
        limit = int(query.get("limit", "0") or 0)
        end = len(keys) if not limit else min(len(keys), start + limit)
        meta: dict[str, Any] = {"resourceVersion": str(self.rv)}
        if end < len(keys):
            meta["continue"] = f"{end}:{self.rv}"
        items = [coll.objects[k] for k in keys[start:end]]
        return _json(200, {"kind": f"{coll.kind}List", "apiVersion": "v1", "metadata": meta, "items": items})

    async def _watch(
        self, request: web.Request, coll: Collection, query: dict[str, str]
    ) -> web.StreamResponse:
        rv = query.get("resourceVersion", "")
        expired = rv not in ("", "0") and int(rv) < self.compacted_rv
        if expired and self.gone_mode == "http":
            return _json(410, status(410, "Expired", f"too old resource version: {rv} ({self.rv})"))
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        if expired:
            err = status(410, "Expired", f"too old resource version: {rv} ({self.rv})")
            await resp.write(json.dumps({"type": "ERROR", "object": err}).encode() + b"\n")
            await resp.write_eof()
            return resp
        queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()
        backlog = [(t, o) for (at, t, o) in coll.history if rv not in ("", "0") and at > int(rv)]
        coll.watchers.add(queue)
        timeout = float(query.get("timeoutSeconds", "300"))
        try:
            for type_, obj in backlog:
                await resp.write(json.dumps({"type": type_, "object": obj}).encode() + b"\n")
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), max(0.0, deadline - loop.time()))
                except TimeoutError:
                    break
                if item is None:
                    break
                type_, obj = item
                await resp.write(json.dumps({"type": type_, "object": obj}).encode() + b"\n")
                if type_ == "ERROR":
                    break
        except ConnectionResetError:
            pass
        finally:
            coll.watchers.discard(queue)
        with contextlib.suppress(ConnectionResetError):
            await resp.write_eof()
        return resp

    def _route(self, method: str, path: str, body: Any, content_type: str) -> web.Response:
        m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)(?:/(binding|status|eviction))?", path)
        if m:
            return self._pod(method, m.group(1), m.group(2), m.group(3) or "", body)
        if path == "/api/v1" and method == "GET":
            return _json(200, self._core_discovery())
        m = re.fullmatch(r"/apis/events\.k8s\.io/v1/namespaces/([^/]+)/events(?:/([^/]+))?", path)
        if m:
            return self._event(method, m.group(1), m.group(2), body)
        m = re.fullmatch(r"/apis/coordination\.k8s\.io/v1/namespaces/([^/]+)/leases(?:/([^/]+))?", path)
        if m:
            return self._lease(method, m.group(1), m.group(2), body)
        m = re.fullmatch(r"/api/v1/nodes/([^/]+)", path)
        if m and method in ("GET", "PATCH"):  # DeviceShare's node lock (DevicePluginAdaption)
            if method == "PATCH":
                return self._merge_patch(NODES, None, m.group(1), body)
            found = self.collections[NODES].objects.get(m.group(1))
            if found is None:
                return _json(404, status(404, "NotFound", f'nodes "{m.group(1)}" not found'))
            return _json(200, found)
        m = re.fullmatch(
            r"/api/v1/(?:namespaces/([^/]+)/)?(persistentvolumes|persistentvolumeclaims)/([^/]+)", path
        )
        if m and method == "PATCH":
            return self._merge_patch(f"/api/v1/{m.group(2)}", m.group(1), m.group(3), body)
        m = re.fullmatch(r"(/apis/[^/]+/[^/]+)/namespaces/([^/]+)/([^/]+)/([^/]+)/status", path)
        if m and method == "PATCH" and f"{m.group(1)}/{m.group(3)}" in self.collections:
            return self._custom_status(f"{m.group(1)}/{m.group(3)}", f"{m.group(2)}/{m.group(4)}", body)
        m = re.fullmatch(r"(/apis/[^/]+/[^/]+)/namespaces/([^/]+)/([^/]+)/([^/]+)", path)
        if m and method == "PATCH" and f"{m.group(1)}/{m.group(3)}" in self.collections:
            return self._custom_merge_patch(
                f"{m.group(1)}/{m.group(3)}", m.group(2), m.group(4), body, content_type
            )
        m = re.fullmatch(r"(/apis/[^/]+/[^/]+/[^/]+)/([^/]+)/status", path)
        if m and method == "PATCH" and m.group(1) in self.collections:  # cluster-scoped (Reservations)
            return self._custom_status(m.group(1), m.group(2), body)
        return _json(404, status(404, "NotFound", f"no route for {method} {path}"))

    def _merge_patch(self, collection: str, ns: str | None, name: str, body: Any) -> web.Response:
        """A JSON merge patch of a PV or claim (VolumeBinding's writes), resourceVersion as a precondition."""
        coll = self.collections.get(collection)
        key = f"{ns}/{name}" if ns else name
        obj = coll.objects.get(key) if coll is not None else None
        if coll is None or obj is None:
            return _json(404, status(404, "NotFound", f'{collection.rsplit("/", 1)[1]} "{name}" not found'))
        want = (body.get("metadata") or {}).get("resourceVersion")
        if want and want != obj["metadata"].get("resourceVersion"):
            return _json(409, status(409, "Conflict", "the object has been modified"))
        return _json(200, self.modify(collection, _merged(obj, body)))

    def _custom_status(self, coll_path: str, key: str, body: Any) -> web.Response:
        """A JSON merge patch of a custom resource's status subresource (only status
        changes; a uid in the patch must match)."""
        coll = self.collections[coll_path]
        obj = coll.objects.get(key)
        if obj is None:
            return _json(404, status(404, "NotFound", f'"{key}" not found'))
        uid = (body.get("metadata") or {}).get("uid")
        if uid is not None and uid != obj["metadata"].get("uid"):
            return _json(409, status(409, "Conflict", f"Precondition failed: UID in precondition: {uid}"))
        # RFC 7386, recursively: a null deep in the status removes that key.
        merged = _merged(obj.get("status") or {}, body.get("status") or {})
        updated = self.modify(coll_path, {**obj, "status": merged})
        return _json(200, updated)

    # --- namespaced custom objects (ElasticQuota status write-back) ----------------------------

    def _custom_merge_patch(
        self, path: str, ns: str, name: str, body: Any, content_type: str
    ) -> web.Response:
        """A JSON merge patch (RFC 7386) of a namespaced object of a served collection."""
        if content_type != "application/merge-patch+json":
            return _json(415, status(415, "UnsupportedMediaType", content_type))
        coll = self.collections[path]
        for key, obj in coll.objects.items():
            meta = obj["metadata"]
            if meta["name"] == name and meta.get("namespace", "") == ns:
                merged = _merged(obj, body)
                merged["metadata"]["resourceVersion"] = self._next_rv()
                coll.objects[key] = merged
                self._emit(coll, "MODIFIED", merged)
                return _json(200, merged)
        return _json(404, status(404, "NotFound", f'"{name}" not found'))

    # --- pods ----------------------------------------------------------------------------------

    def _pod(self, method: str, ns: str, name: str, sub: str, body: Any) -> web.Response:
        coll = self.collections[PODS]
        key = f"{ns}/{name}"
        pod = coll.objects.get(key)
        if pod is None:
            return _json(404, status(404, "NotFound", f'pods "{name}" not found'))
        pod = copy.deepcopy(pod)
        if method == "POST" and sub == "binding":
            uid = body.get("metadata", {}).get("uid")
            if uid and uid != pod["metadata"]["uid"]:
                return _json(409, status(409, "Conflict", f"Precondition failed: UID in precondition: {uid}"))
            if pod["spec"].get("nodeName"):
                msg = (
                    f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is already '
                    f'assigned to node "{pod["spec"]["nodeName"]}"'
                )
                return _json(409, status(409, "Conflict", msg))
            pod["spec"]["nodeName"] = body["target"]["name"]
            annotations = body.get("metadata", {}).get("annotations") or {}
            if annotations:
                pod["metadata"].setdefault("annotations", {}).update(annotations)
            conditions = [
                c for c in pod.setdefault("status", {}).get("conditions", []) if c["type"] != "PodScheduled"
            ]
            pod["status"]["conditions"] = [*conditions, {"type": "PodScheduled", "status": "True"}]
            self.modify(PODS, pod)
            return _json(201, status(201, "", ""))
        if method == "PATCH" and sub == "status":
            uid = (body.get("metadata") or {}).get("uid")
            if uid and uid != pod["metadata"]["uid"]:
                return _json(422, status(422, "Invalid", "metadata.uid: field is immutable"))
            merged = {c["type"]: c for c in pod.setdefault("status", {}).get("conditions", [])}
            for c in body.get("status", {}).get("conditions", []):
                merged[c["type"]] = {**merged.get(c["type"], {}), **c}
            pod["status"]["conditions"] = list(merged.values())
            if "nominatedNodeName" in body.get("status", {}):
                nominated = body["status"]["nominatedNodeName"]
                if nominated:
                    pod["status"]["nominatedNodeName"] = nominated
                else:
                    pod["status"].pop("nominatedNodeName", None)
            return _json(200, self.modify(PODS, pod))
        if method == "POST" and sub == "eviction":
            return self._evict(pod, body)
        if method == "DELETE" and not sub:
            uid = ((body or {}).get("preconditions") or {}).get("uid")
            if uid and uid != pod["metadata"]["uid"]:
                have = pod["metadata"]["uid"]
                msg = f"Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"
                return _json(409, status(409, "Conflict", msg))
            self.delete(PODS, key)
            return _json(200, pod)
        if method == "PATCH" and not sub:
            pod["metadata"].setdefault("labels", {}).update(body.get("metadata", {}).get("labels", {}))
            return _json(200, self.modify(PODS, pod))
        if method == "GET" and not sub:
            return _json(200, pod)
        return _json(405, status(405, "MethodNotAllowed", f"{method} pods/{sub}"))

    def _core_discovery(self) -> dict[str, Any]:
        """``GET /api/v1``'s APIResourceList, as far as clients read it here (pods/eviction)."""
        resources: list[dict[str, Any]] = [
            {"name": "pods", "namespaced": True, "kind": "Pod", "verbs": ["create", "delete", "get"]}
        ]
        if self.eviction_versions:
            resources.append(
                {
                    "name": "pods/eviction",
                    "namespaced": True,
                    "group": "policy",
                    "version": self.eviction_versions[-1],
                    "kind": "Eviction",
                    "verbs": ["create"],
                }
            )
        return {"kind": "APIResourceList", "groupVersion": "v1", "resources": resources}

    def _evict(self, pod: dict[str, Any], body: Any) -> web.Response:
        """An Eviction in a version this server takes deletes the pod (no budgets here)."""
        api_version = (body or {}).get("apiVersion", "")
        group, _, version = str(api_version).partition("/")
        if group != "policy" or version not in self.eviction_versions:
            msg = f'no kind "Eviction" is registered for version "{api_version}"'
            return _json(400, status(400, "BadRequest", msg))
        uid = (((body or {}).get("deleteOptions") or {}).get("preconditions") or {}).get("uid")
        if uid and uid != pod["metadata"]["uid"]:
            have = pod["metadata"]["uid"]
            msg = f"Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"
            return _json(409, status(409, "Conflict", msg))
        self.delete(PODS, self.collections[PODS].key(pod))
        return _json(201, status(201, "", ""))

    # --- events --------------------------------------------------------------------------------

    def _event(self, method: str, ns: str, name: str | None, body: Any) -> web.Response:
        if method == "POST" and name is None:
            if not MICRO_TIME.match(body.get("eventTime", "")):
                return _json(
                    422, status(422, "Invalid", f"eventTime: invalid MicroTime {body.get('eventTime')!r}")
                )
            if body["metadata"]["namespace"] != ns:
                return _json(422, status(422, "Invalid", "namespace mismatch"))
            self.events[body["metadata"]["name"]] = body
            return _json(201, body)
        if method == "PATCH" and name is not None:
            event = self.events.get(name)
            if event is None:
                return _json(404, status(404, "NotFound", f'events "{name}" not found'))
            series = body.get("series", {})
            if not MICRO_TIME.match(series.get("lastObservedTime", "")):
                return _json(422, status(422, "Invalid", "series.lastObservedTime: invalid MicroTime"))
            event["series"] = series
            self.event_patches.append(body)
            return _json(200, event)
        return _json(405, status(405, "MethodNotAllowed", method))

    # --- leases --------------------------------------------------------------------------------

    def _lease(self, method: str, ns: str, name: str | None, body: Any) -> web.Response:
        if method in ("POST", "PUT"):
            spec = body.get("spec", {})
            for f in ("acquireTime", "renewTime"):
                if spec.get(f) is not None and not MICRO_TIME.match(spec[f]):
                    return _json(422, status(422, "Invalid", f"spec.{f}: invalid MicroTime {spec[f]!r}"))
        if method == "GET" and name:
            lease = self.leases.get(f"{ns}/{name}")
            if lease is None:
                return _json(404, status(404, "NotFound", f'leases.coordination.k8s.io "{name}" not found'))
            return _json(200, lease)
        if method == "POST" and name is None:
            key = f"{ns}/{body['metadata']['name']}"
            if key in self.leases:
                return _json(409, status(409, "AlreadyExists", "lease already exists"))
            lease = copy.deepcopy(body)
            lease["metadata"]["resourceVersion"] = self._next_rv()
            lease["metadata"]["uid"] = f"uid-{next(self._uids)}"
            self.leases[key] = lease
            return _json(201, lease)
        if method == "PUT" and name:
            key = f"{ns}/{name}"
            current = self.leases.get(key)
            if current is None:
                return _json(404, status(404, "NotFound", "lease not found"))
            if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                return _json(409, status(409, "Conflict", "the object has been modified"))
            lease = copy.deepcopy(body)
            lease["metadata"]["resourceVersion"] = self._next_rv()
            self.leases[key] = lease
            return _json(200, lease)
        return _json(405, status(405, "MethodNotAllowed", method))

    def lease(self, ns: str, name: str) -> dict[str, Any] | None:
        return self.leases.get(f"{ns}/{name}")

    def take_lease(self, ns: str, name: str, holder: str, duration: int = 15) -> None:
        """Another candidate writes the lease (bumping its resourceVersion)."""
        lease = copy.deepcopy(self.leases[f"{ns}/{name}"])
        lease["spec"]["holderIdentity"] = holder
        lease["spec"]["leaseDurationSeconds"] = duration
        lease["metadata"]["resourceVersion"] = self._next_rv()
        self.leases[f"{ns}/{name}"] = lease


def pod_json(
    name: str,
    *,
    namespace: str = "default",
    node: str = "",
    scheduler: str = "koord-scheduler",
    cpu: str = "100m",
    uid: str | None = None,
    **extra_meta: Any,
) -> dict[str, Any]:
    return pod_manifest(
        name,
        cpu,
        "64Mi",
        namespace=namespace,
        uid=uid or "",
        scheduler=scheduler,
        node_name=node,
        image="busybox",
        metadata=extra_meta,
        status={"phase": "Pending"},
    )


def node_json(name: str, cpu: str = "4", memory: str = "8Gi", **extra_meta: Any) -> dict[str, Any]:
    return {"spec": {}, **node_manifest(name, cpu, memory, metadata=extra_meta)}
