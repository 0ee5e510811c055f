"""A kube-apiserver stub under the real `kubernetes` client: its urllib3 pool answers from memory.

Only what the kubernetes backend sends: namespaces, nodes, ConfigMaps, Jobs, Pods, Pod logs and
Kueue LocalQueues; label selectors of the forms `k=v`, `k in (a,b)`, `k` (the label exists) and `!k` (it does not). Every request is kept in
`sent` as (method, path, query, body).
"""

import copy
import json
import re
from urllib.parse import parse_qsl, urlsplit

from kubernetes import client

from ansible_collections.bridge.hpc.plugins.module_utils.k8s.client import K8sClient


class Response:
    def __init__(self, status, body, headers=None):
        self.status = status
        self.reason = {200: "OK", 201: "Created", 404: "Not Found", 409: "Conflict"}.get(status, "Error")
        self.data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        self.headers = headers or {}

    def getheaders(self):
        return self.headers

    def getheader(self, name, default=None):
        return self.headers.get(name, default)


def status(code, reason, message):
    return Response(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
                           "reason": reason, "code": code})


def matches(labels, selector):
    for term in [t for t in re.split(r",(?![^(]*\))", selector or "") if t]:
        found = re.match(r"^([^ =]+) in \((.*)\)$", term)
        if found:
            if labels.get(found.group(1)) not in found.group(2).split(","):
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif "=" not in term:
            if term not in labels:
                return False
        else:
            key, value = term.split("=", 1)
            if labels.get(key) != value:
                return False
    return True


class ApiServerStub:
    def __init__(self, namespaces=("default",), nodes=(), kueue=False):
        self.namespaces = set(namespaces)
        self.nodes = list(nodes)
        self.kueue = kueue
        self.local_queues = {}
        self.objects = {"configmaps": {}, "jobs": {}, "pods": {}}
        self.logs = {}
        self.sent = []
        self.faults = []      # (method, path regex, Response) answered once instead
        self.uid = 0

    # -- the pool manager interface urllib3 offers the kubernetes client

    def request(self, method, url, fields=None, body=None, preload_content=True, timeout=None, headers=None):
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query)) or dict(fields or [])
        payload = json.loads(body) if isinstance(body, (str, bytes)) and body else body
        self.sent.append((method, parts.path, query, payload))
        for fault in list(self.faults):
            if fault[0] == method and re.search(fault[1], parts.path):
                self.faults.remove(fault)
                return fault[2]
        return self.route(method, parts.path, query, payload)

    def route(self, method, path, query, body):
        if path in ("/version", "/version/"):
            return Response(200, {"major": "1", "minor": "34", "gitVersion": "v1.34.4"})
        if path == "/api/v1/nodes":
            return Response(200, {"kind": "NodeList", "items": self.nodes})
        found = re.match(r"^/api/v1/namespaces/([^/]+)$", path)
        if found:
            if found.group(1) in self.namespaces:
                return Response(200, {"kind": "Namespace", "metadata": {"name": found.group(1)}})
            return status(404, "NotFound", 'namespaces "%s" not found' % found.group(1))
        found = re.match(r"^/apis/kueue.x-k8s.io/v1beta1/namespaces/([^/]+)/localqueues(?:/([^/]+))?$", path)
        if found:
            if not self.kueue:
                return status(404, "NotFound", "the server could not find the requested resource")
            if found.group(2):
                queue = self.local_queues.get((found.group(1), found.group(2)))
                if queue is None:
                    return status(404, "NotFound", 'localqueues.kueue.x-k8s.io "%s" not found' % found.group(2))
                return Response(200, queue)
            return Response(200, {"items": [q for (ns, _n), q in sorted(self.local_queues.items()) if ns == found.group(1)]})
        found = re.match(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/log$", path)
        if found:
            return Response(200, self.logs.get(found.group(2), "").encode("utf-8"))
        found = re.match(r"^/(?:api/v1|apis/batch/v1)/namespaces/([^/]+)/(configmaps|jobs|pods)(?:/([^/]+))?$", path)
        if found:
            return self.objects_route(method, found.group(1), found.group(2), found.group(3), query, body)
        return status(404, "NotFound", "the server could not find the requested resource")

    def objects_route(self, method, namespace, kind, name, query, body):
        store = self.objects[kind]
        if name is None and method == "GET":
            items = [o for (ns, _n), o in sorted(store.items())
                     if ns == namespace and matches(o["metadata"].get("labels") or {}, query.get("labelSelector"))]
            return Response(200, {"kind": "List", "items": copy.deepcopy(items)})
        if name is None and method == "POST":
            key = (namespace, body["metadata"]["name"])
            if key in store:
                return status(409, "AlreadyExists", '%s "%s" already exists' % (kind, key[1]))
            created = copy.deepcopy(body)
            self.uid += 1
            created["metadata"].update(uid="uid-%d" % self.uid, creationTimestamp="2026-12-01T17:00:%02dZ" % self.uid,
                                       resourceVersion=str(self.uid))
            created.setdefault("status", {})
            store[key] = created
            return Response(201, created)
        key = (namespace, name)
        if key not in store:
            return status(404, "NotFound", '%s "%s" not found' % (kind, name))
        if method == "GET":
            return Response(200, copy.deepcopy(store[key]))
        if method == "PATCH":
            merge(store[key], body)
            return Response(200, copy.deepcopy(store[key]))
        if method == "DELETE":
            gone = store.pop(key)
            return Response(200, gone)
        return status(405, "MethodNotAllowed", method)

    # -- test helpers

    def client(self, namespace="default", retries=0, **kwargs):
        configuration = client.Configuration()
        configuration.host = "https://apiserver.test:6443"
        api_client = client.ApiClient(configuration)
        api_client.rest_client.pool_manager = self
        return K8sClient(namespace=namespace, api_client=api_client, retries=retries, sleep=lambda s: None, **kwargs)

    def set_status(self, namespace, name, job_status, pods=()):
        job = self.objects["jobs"][(namespace, name)]
        job["status"] = job_status
        for pod in pods:
            pod = copy.deepcopy(pod)
            pod["metadata"]["namespace"] = namespace
            pod["metadata"]["labels"] = dict(job["spec"]["template"]["metadata"]["labels"], **{"job-name": name})
            pod["metadata"]["ownerReferences"] = [{"kind": "Job", "name": name, "uid": job["metadata"]["uid"]}]
            self.objects["pods"][(namespace, pod["metadata"]["name"])] = pod


def merge(target, patch):
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = value


def node(name, cpu="4", memory="8026164Ki", labels=None, gpus=None):
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "47227284Ki"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    return {"metadata": {"name": name, "labels": dict({"kubernetes.io/hostname": name}, **(labels or {}))},
            "spec": {}, "status": {"allocatable": allocatable, "conditions": [{"type": "Ready", "status": "True"}]}}
