"""Where a BridgeJob with spec.placement runs: its candidates from the catalog's cache, the
collection's one placement decision (module_utils/_placement.py), and what that makes of its status.

No request is made: the candidates' capacity is what the probe last wrote into their status, as
the catalog's watch holds it. Candidates are the explicit list in its order, or those matching the
selector: the BridgeBackends of the job's namespace, then the ClusterBridgeBackends that admit it,
each by name. A candidate the job may not use (a policy refusal, a namespaceSelector) is rejected
with that reason; one not in the catalog, or never probed, is waited for, not rejected, so that a
controller starting before its caches filled does not fail jobs.
"""

import collections

from bridge_controller import backend_objects
from bridge_controller.collection import module_utils
from bridge_controller.resolver import has_namespace_selector
from bridge_controller.status import now_rfc3339

_placement = module_utils("_placement")

MAX_REJECTED = 50
MAX_REASON = 300
MAX_MESSAGE = 4096
CLUSTER = "ClusterBridgeBackend"
NAMESPACED = "BridgeBackend"

# chosen: status.placement of a choice; else wait (reason, message) or, when neither, the job is
# unplaceable: status.placement (with the reasons) and the Failed message.
Decision = collections.namedtuple("Decision", "placement placed waiting message")


def _label(kind, name):
    return "%s/%s" % (kind, name)


def selects(selector, labels):
    """Whether metav1.LabelSelector `selector` matches `labels` (an empty selector matches all)."""
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
        present = key in labels
        if ((operator == "In" and (not present or labels[key] not in values))
                or (operator == "NotIn" and present and labels[key] in values)
                or (operator == "Exists" and not present) or (operator == "DoesNotExist" and present)):
            return False
    return True


def _waiting_entry(label, reason):
    # ready None: _placement.place lists it as waiting, never as rejected.
    return {"name": label, "type": None, "ready": None, "reason": reason, "queues": [], "allowed_queues": None}


def candidates(obj, catalog, refusal):
    """(the `candidates` of _placement.place, {label: {kind, name}}, {label: why it is waited for}).
    `refusal(backend_obj)` says why the job may not use a backend object (None when it may, or
    when it cannot tell yet)."""
    namespace = obj["metadata"].get("namespace")
    spec = obj["spec"]["placement"]
    entries, refs, waits = [], {}, {}

    def add(kind, found, name, allowed=None):
        label = _label(kind, name)
        refs[label] = {"kind": kind, "name": name}
        if found is None:
            waits[label] = "%s not found" % label
            entries.append(_waiting_entry(label, waits[label]))
            return
        if kind == CLUSTER and has_namespace_selector(found) and catalog.namespace_labels(namespace) is None:
            waits[label] = "the labels of namespace '%s' are not known yet" % namespace
            entries.append(_waiting_entry(label, waits[label]))
            return
        entry = dict(backend_objects.candidate_of(found), name=label, allowed_queues=allowed)
        refused = refusal(found)
        if refused:
            entry.update(ready=False, reason=refused[1])
        elif entry.get("ready") is None:
            waits[label] = "%s has not been probed yet" % label
        entries.append(entry)

    if spec.get("candidates"):
        for candidate in spec["candidates"]:
            kind = candidate.get("kind") or NAMESPACED
            found = catalog.backend(kind, "" if kind == CLUSTER else namespace, candidate["name"]) if catalog else None
            add(kind, found, candidate["name"], candidate.get("queues") or None)
        return entries, refs, waits
    selector = spec.get("selector") or {}
    chosen = []
    for found in (catalog.backends() if catalog else []):
        kind, meta = found.get("kind"), found.get("metadata") or {}
        if kind == NAMESPACED and meta.get("namespace") != namespace:
            continue
        if kind not in (NAMESPACED, CLUSTER) or not selects(selector, meta.get("labels")):
            continue
        if kind == CLUSTER and refusal(found):
            continue   # a selector finds only what the namespace may use
        chosen.append((kind != NAMESPACED, meta.get("name"), kind, found))
    for _cluster, name, kind, found in sorted(chosen, key=lambda item: item[:2]):
        add(kind, found, name)
    return entries, refs, waits


def _bounded(rejected):
    # A queue of None (the candidate as a whole) is left out: the stored status holds no nulls.
    return [dict({"backend": item["backend"], "reason": str(item.get("reason") or "")[:MAX_REASON]},
                 **({"queue": item["queue"]} if item.get("queue") is not None else {}))
            for item in rejected[:MAX_REJECTED]]


def _reasons(rejected):
    return "; ".join("%s%s: %s" % (item["backend"], " queue %s" % item["queue"] if item.get("queue") else "", item["reason"])
                     for item in rejected)


def decide(obj, catalog, params, refusal, now=None):
    """The placement of BridgeJob `obj` whose job spec is `params` (spec.job_params)."""
    entries, refs, waits = candidates(obj, catalog, refusal)
    policy = obj["spec"]["placement"].get("policy") or "FirstFit"
    result = _placement.place(params, entries, policy)
    rejected = _bounded(result["rejected"])
    if result["backend"]:
        placement = {"backend": refs[result["backend"]], "type": result["type"], "policy": policy,
                     "rejected": rejected, "placedTime": now or now_rfc3339()}
        if result["queue"] is not None:
            placement["queue"] = result["queue"]
        where = result["backend"] + (" queue %s" % result["queue"] if result["queue"] is not None else "")
        return Decision(placement, (True, "Placed", "%s chose %s" % (policy, where)), None, None)
    if result["waiting"] or not entries:
        why = "; ".join(waits.get(name, "%s has not been probed yet" % name) for name in result["waiting"])
        if not entries:
            why = "no backend object matches spec.placement.selector yet"
        return Decision(None, None, ("WaitingForProbe", why[:MAX_MESSAGE]), None)
    # Every reason, as far as the Failed condition's message goes (status.placement keeps 50).
    message = ("fits none of its candidates (%s): %s" % (policy, _reasons(result["rejected"])))[:MAX_MESSAGE]
    return Decision({"policy": policy, "rejected": rejected}, (False, "Unplaceable", message), None, message)
