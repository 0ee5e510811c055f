"""bridge-controller: watch BridgeJobs, reconcile them with the collection's playbooks.

watch (list+watch, the one object cache) -> queue (per-key, deduplicated, bounded workers, backoff)
-> plan (pure) -> batches (per backend) -> resolver (Secret, ConfigMaps) -> runner (ansible-runner)
-> results (pure) -> writer (status, finalizers, events); executor.py runs that loop, this file
parses flags, wires the parts together and serves /healthz, /readyz and /metrics.
"""

import argparse
import http.server
import logging
import os
import signal
import socket
import sys
import threading

from bridge_controller import __version__, collection
from bridge_controller.authority import DEFAULT_JOB_SERVICE_ACCOUNT, Authority
from bridge_controller.catalog import Catalog
from bridge_controller.collection import module_utils
from bridge_controller.executor import Executor
from bridge_controller.kube import KubeApi
from bridge_controller.policy import Policy
from bridge_controller.probe import Prober
from bridge_controller.queue import ExponentialBackoff, WorkQueue, run_workers
from bridge_controller.runner import AnsibleRunner
from bridge_controller.watch import BridgeJobWatcher, without_managed_fields

LOG = logging.getLogger("bridge_controller")
STATUS_WRITERS = 8
EVENT_WRITERS = 2
# The catalog's three watches (backend objects of both kinds, namespaces) and the probes' status writes.
CATALOG_CONNECTIONS = 3 + 4


def make_parser():
    """The flags (docs/controller.md's table lists each; tests/unit/controller/test_docs_flags.py checks it)."""
    parser = argparse.ArgumentParser(prog="bridge-controller", description=__doc__)
    parser.add_argument("--kubeconfig", help="kubeconfig file; in-cluster configuration when unset")
    parser.add_argument("--namespace", help="watch one namespace only (default: all)")
    parser.add_argument("--selector",
                        help="label selector: this controller handles only matching BridgeJobs (sharding load; the "
                             "labels are the tenants', so it separates no tenants)")
    parser.add_argument("--namespace-selector",
                        help="label selector of namespaces: this controller acts only on the BridgeJobs of the namespaces "
                             "it matches (their labels are the cluster admin's: tenants are separated so)")
    parser.add_argument("--backend-selector",
                        help="label selector: this controller caches, places on and probes only matching BridgeBackends and "
                             "ClusterBridgeBackends (default: --selector's, so that shards never probe one object twice; "
                             "'' for all)")
    parser.add_argument("--workers", type=int, default=8, help="reconcile workers (default 8)")
    parser.add_argument("--batch-window", type=float, default=0.05,
                        help="seconds a batch gathers after its first submit or cancel arrives; what arrives while a "
                             "batch runs joins the next one (default 0.05)")
    parser.add_argument("--max-batch", type=int, default=500, help="jobs per runner invocation at most")
    parser.add_argument("--retry-base", type=float, default=2.0,
                        help="seconds before the first retry of a CR whose backend failed; doubles with each failure (default 2)")
    parser.add_argument("--retry-cap", type=float, default=300.0,
                        help="the longest wait between retries, and the wait after a permanent backend error such as "
                             "failed authentication (default 300)")
    parser.add_argument("--playbook-dir", default=os.environ.get("BRIDGE_PLAYBOOK_DIR", "/usr/share/bridge/playbooks"))
    parser.add_argument("--work-dir", "--runner-dir", dest="work_dir", default=os.environ.get("BRIDGE_WORK_DIR", "/tmp/bridge-runner"),
                        help="ansible-runner's private data dir (artifacts rotate); keep it on tmpfs")
    parser.add_argument("--collections-path", default=os.environ.get("ANSIBLE_COLLECTIONS_PATH"),
                        help="ANSIBLE_COLLECTIONS_PATH of the playbooks; the controller itself imports bridge.hpc from "
                             "ANSIBLE_COLLECTIONS_PATH's (default: $ANSIBLE_COLLECTIONS_PATH)")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter of the modules, ANSIBLE_PYTHON_INTERPRETER (default: the controller's own)")
    parser.add_argument("--rotate-artifacts", type=int, default=50, help="ansible-runner artifact dirs kept (default 50)")
    parser.add_argument("--standby", default="submit",
                        help="comma-separated actions (submit, poll, cancel) whose playbook is started ahead of its "
                             "work, so that it only waits for the backend; empty for none (default: submit)")
    parser.add_argument("--max-standby", type=int, default=2,
                        help="standby playbooks kept at most, for the backends used last (~150 MiB each)")
    parser.add_argument("--port", "--http-port", dest="port", type=int, default=8080, help="/healthz, /readyz and /metrics")
    parser.add_argument("--bind-address", default="0.0.0.0", help="address of that endpoint (probes reach the pod IP)")
    parser.add_argument("--leader-elect", action="store_true", help="act only while holding the Lease")
    parser.add_argument("--lease-namespace", default=os.environ.get("POD_NAMESPACE", "bridge-system"),
                        help="namespace of the Lease (default: $POD_NAMESPACE, the pod's own as the Deployment sets it, "
                             "else bridge-system)")
    parser.add_argument("--lease-name", default="bridge-controller", help="name of the Lease (default bridge-controller)")
    parser.add_argument("--lease-duration", type=int, default=30,
                        help="seconds a standby waits, after the Lease last changed, before taking it (default 30)")
    parser.add_argument("--renew-deadline", type=float, default=20.0,
                        help="seconds the leader acts without a successful renewal; less than --lease-duration (default 20)")
    parser.add_argument("--retry-period", type=float, default=5.0,
                        help="seconds between renewals and between a standby's attempts (default 5)")
    # What tenants may make the controller do (policy.py, docs/security.md); each default is the safe one.
    parser.add_argument("--allowed-backend-url", dest="allowed_backend_urls", action="append", default=[],
                        metavar="PREFIX",
                        help="scheme://host[:port][/path] a BridgeJob's backend URLs (url, iamUrl, a kubeconfig's "
                             "servers; a Slurm login node as ssh://host:port) must start with; repeat for more; any "
                             "URL when none is given")
    parser.add_argument("--job-service-account", default=DEFAULT_JOB_SERVICE_ACCOUNT,
                        help="the ServiceAccount, in each BridgeJob's namespace, whose short-lived token runs the Jobs of "
                             "a kubernetes backend without credentialsSecretRef (deploy/tenant/ makes it; default %s)"
                             % DEFAULT_JOB_SERVICE_ACCOUNT)
    parser.add_argument("--identity-key-file", metavar="PATH",
                        help="file of the key that tags the identity in each Slurm job's comment, so that no other "
                             "user of the cluster can make a job Bridge takes for a BridgeJob's (a Secret tenants "
                             "cannot read; one key a line, the first tags, all verify)")
    for feature, what in (("exec", "exec and auth-provider plugins, which run commands on the controller's machine"),
                          ("files", "tokenFile and certificate, key and CA file paths, which read the controller's files"),
                          ("tls", "insecure-skip-tls-verify")):
        parser.add_argument("--insecure-kubeconfig-%s" % feature, dest="kubeconfig_features", action="append_const",
                            const=feature, default=[],
                            help="allow %s in kubeconfigs from BridgeJobs' Secrets (default: refused)" % what)
    return parser


def parse_args(argv):
    parser = make_parser()
    args = parser.parse_args(argv)
    if not args.lease_duration > args.renew_deadline > args.retry_period > 0:
        parser.error("need --lease-duration > --renew-deadline > --retry-period > 0")
    if args.kubeconfig_features and not (args.namespace or args.namespace_selector):
        # A kubeconfig feature runs commands or reads files on the controller's machine: only for the
        # namespaces an admin chose, never for whoever can label a BridgeJob (--selector).
        parser.error("--insecure-kubeconfig-%s needs --namespace or --namespace-selector: the namespaces whose "
                     "tenants may use it" % args.kubeconfig_features[0])
    try:
        args.policy = Policy(args.allowed_backend_urls, args.kubeconfig_features)
    except ValueError as exc:
        parser.error("--allowed-backend-url: %s" % exc)
    args.identity_key = identity_key_of(parser, args.identity_key_file)
    # The controller reads the collection it runs: its backends, error kinds and phases must be
    # those of the modules its playbooks call.
    problem = args.collections_path and collection.mismatch(args.collections_path)
    if problem:
        parser.error("--collections-path: %s; give ANSIBLE_COLLECTIONS_PATH the same path" % problem)
    return args


def refuse_ambient_credentials(environ):
    """Nothing run for a BridgeJob (the playbooks, which inherit `environ`, and the probe's clients in
    this process) may find the controller's own credentials: the Kubernetes variables go, and
    AMBIENT_CREDENTIALS tells the collection's clients not to fall back to the in-cluster
    ServiceAccount either (module_utils/k8s/client.py)."""
    for name in list(environ):
        if name == "KUBECONFIG" or name.startswith("K8S_AUTH_"):
            del environ[name]
    environ[module_utils("k8s.client").AMBIENT_CREDENTIALS] = "refuse"


def identity_key_of(parser, path):
    """The text of --identity-key-file (None without it); an unreadable or empty file stops the
    controller, since jobs tagged with its key would otherwise be submitted untagged."""
    if not path:
        return None
    try:
        with open(path) as handle:
            text = handle.read(65536)
    except (IOError, OSError) as exc:
        parser.error("--identity-key-file: cannot read '%s': %s" % (path, exc.strerror or type(exc).__name__))
    if not text.strip():
        parser.error("--identity-key-file: '%s' holds no key" % path)
    return text


def metrics_text(executor, queue, watcher):
    lines = []
    for name, value in sorted(executor.stats.items()):
        lines.append("bridge_%s %s" % (name, value))
    depth = queue.depth()
    # Waiting keys are CRs whose retry (a backoff after a failure) or ConfigMap is not due yet.
    lines.extend(["bridge_queue_depth %d" % depth.ready, "bridge_queue_waiting %d" % depth.waiting,
                  "bridge_queue_processing %d" % depth.processing])
    lines.append("bridge_undecodable_objects %d" % watcher.skipped)
    phases = {}
    for obj in filter(None, map(watcher.get, watcher.keys())):
        phase = (obj.get("status") or {}).get("phase") or "Pending"
        phases[phase] = phases.get(phase, 0) + 1
    for phase, count in sorted(phases.items()):
        lines.append('bridge_tracked_jobs{phase="%s"} %d' % (phase, count))
    return "\n".join(lines) + "\n"


def serve(address, port, health):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's naming)
            code, body = health(self.path)
            self.send_response(code)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body.encode("utf-8"))

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer((address, port), Handler)
    threading.Thread(target=server.serve_forever, name="bridge-http", daemon=True).start()
    return server


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # The probe's clients (httpx) run in this process: one INFO line per request would be most of the log.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    from kubernetes import client, config

    if args.kubeconfig:
        config.load_kube_config(args.kubeconfig)
    else:
        config.load_incluster_config()
    refuse_ambient_credentials(os.environ)
    configuration = client.Configuration.get_default_copy()
    # Workers, status writers, the watch and the batch thread each hold a connection at times;
    # urllib3's default of 10 made it drop and reopen them under load ("pool is full").
    configuration.connection_pool_maxsize = args.workers + STATUS_WRITERS + EVENT_WRITERS + 4 + CATALOG_CONNECTIONS
    api_client = client.ApiClient(configuration)
    queue = WorkQueue(max_workers=args.workers, rate_limiter=ExponentialBackoff(base=args.retry_base, cap=args.retry_cap))
    standby = [action for action in args.standby.split(",") if action]
    runner = AnsibleRunner(args.playbook_dir, args.work_dir, collections_path=args.collections_path,
                           rotate_artifacts=args.rotate_artifacts, python=args.python, standby=standby,
                           max_standby=args.max_standby, allow_list=args.policy.allow_list,
                           identity_key=args.identity_key)

    # The watcher's cache is the executor's too, so the handler is bound late: each needs the other.
    def observe(kind, obj):
        executor.observe(kind, obj)

    events = KubeApi(api_client)
    # managedFields are half of every object and the controller never reads them (measured: 10,000
    # cached BridgeJobs take 196 MiB with them, 84 MiB without).
    watcher = BridgeJobWatcher(client.CustomObjectsApi(api_client), observe,
                               namespace=args.namespace, label_selector=args.selector, transform=without_managed_fields,
                               on_skipped=lambda skipped: events.undecodable(skipped.metadata, skipped.reason))
    # Backend objects: the catalog's watches and the probe thread (catalog.py, probe.py).
    backend_selector = args.selector if args.backend_selector is None else args.backend_selector
    catalog = Catalog(client.CustomObjectsApi(api_client), client.CoreV1Api(api_client), namespace=args.namespace,
                      label_selector=backend_selector or None, namespace_selector=args.namespace_selector)
    kube = KubeApi(api_client)
    authorizer = Authority(kube, job_service_account=args.job_service_account)
    prober = Prober(catalog, kube, args.policy, os.path.join(os.path.abspath(args.work_dir), "probe"), authorizer=authorizer)
    executor = Executor(kube, watcher, runner, queue, max_batch=args.max_batch,
                        batch_window=args.batch_window, status_writers=STATUS_WRITERS, event_writers=EVENT_WRITERS,
                        policy=args.policy, catalog=catalog, authorizer=authorizer)
    stopping = threading.Event()
    started = threading.Event()

    threads = []

    def start():
        LOG.info("bridge-controller %s acting (selector %r, backend URLs %s, insecure kubeconfig features %s)",
                 __version__, args.selector, ", ".join(args.allowed_backend_urls) or "any",
                 ", ".join(args.kubeconfig_features) or "none")
        threads.append(threading.Thread(target=watcher.run, name="bridge-watch", daemon=True))
        threads.append(threading.Thread(target=prober.run, args=(stopping,), name="bridge-probe", daemon=True))
        threads.append(threading.Thread(target=executor.run_batches, args=(stopping,), name="bridge-batches", daemon=True))
        threads.append(threading.Thread(target=executor.run_polls, args=(stopping,), name="bridge-polls", daemon=True))
        for thread in threads:
            thread.start()
        threads.extend(catalog.start())
        threads.extend(run_workers(queue, executor.reconcile))
        started.set()

    def health(path):
        if path == "/healthz":
            return 200, "ok\n"
        if path == "/readyz":
            ready = started.is_set() and watcher.wait_synced(0) and catalog.wait_synced(0)
            return (200, "ready\n") if ready else (503, "not ready\n")
        if path == "/metrics":
            return 200, metrics_text(executor, queue, watcher) + "".join(line + "\n" for line in prober.metrics_lines())
        return 404, "not found\n"

    server = serve(args.bind_address, args.port, health)

    def shut_down(*_signal):
        LOG.info("shutting down: finishing the running playbook")
        stopping.set()
        executor.batches.wake()

    signal.signal(signal.SIGTERM, shut_down)
    signal.signal(signal.SIGINT, shut_down)
    elector = None
    if args.leader_elect:
        from bridge_controller.leader import LeaderElector

        elector = LeaderElector(client.CoordinationV1Api(api_client), args.lease_namespace, args.lease_name,
                                os.environ.get("POD_NAME") or "%s-%d" % (socket.gethostname(), os.getpid()),
                                lease_duration=args.lease_duration, renew_deadline=args.renew_deadline,
                                retry_period=args.retry_period)
        runner.may_act = executor.may_act = prober.may_act = elector.is_leading
        threading.Thread(target=elector.run, args=(start, shut_down), name="bridge-leader", daemon=True).start()
    else:
        start()
    stopping.wait()
    watcher.stop()
    catalog.stop()
    queue.shutdown(drain=False)
    for thread in threads:
        if thread.name in ("bridge-batches", "bridge-polls"):
            thread.join()
    runner.close()
    if elector is not None:
        elector.stop()
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
