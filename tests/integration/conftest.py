"""Shared pieces of the integration tests: the real clusters started by tools/ and ansible runs."""

import contextlib
import fcntl
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = os.environ.get("BRIDGE_RUN", os.path.join(REPO, ".run"))
# The collection under test is this checkout's (tools/bootstrap.sh links it), also when BRIDGE_RUN
# points at the services another checkout started.
COLLECTIONS = os.path.join(REPO, ".run", "collections")
VENV_BIN = os.path.dirname(sys.executable)
# Helpers shared with tests/unit (fault_server.py) live in tests/.
if os.path.join(REPO, "tests") not in sys.path:
    sys.path.append(os.path.join(REPO, "tests"))
SLURM_VERSIONS = ("22.05", "24.11", "26.05")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "serial: needs the machine or a shared service to itself (load, image loads, lease timing); "
        "`make integration` runs these after the parallel run, one at a time")
    if not hasattr(config, "workerinput") and config.getoption("numprocesses", None):
        from scheduling import UnitTimes  # pylint: disable=import-outside-toplevel
        config.pluginmanager.register(UnitTimes(os.path.join(REPO, ".run", "budget", "integration-units.tsv")))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    # Imported here: scheduling.py needs xdist, which a run without workers does not load.
    from scheduling import ModuleScheduling  # pylint: disable=import-outside-toplevel
    return ModuleScheduling(config, log)


def slurm_env(version):
    """The env file tools/slurm-cluster.sh wrote for one cluster, or None if it is not running."""
    return read_env_file(os.path.join(RUN, "slurm-%s" % version, "env"))


def require_slurm(version):
    return required(slurm_env(version), "Slurm %s is not running: tools/slurm-cluster.sh start %s" % (version, version))


def required(values, message):
    """Env of a running service. Under `make test` (BRIDGE_REQUIRE_SERVICES=1) a missing one fails
    with `message`; otherwise the test is skipped."""
    if values is None:
        if os.environ.get("BRIDGE_REQUIRE_SERVICES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return values


def read_env_file(path):
    if not os.path.exists(path):
        return None
    values = {}
    with open(path) as handle:
        for line in handle:
            key, sep, value = line.strip().partition("=")
            if sep:
                values[key] = value
    return values


def ray_env():
    """The env file tools/ray-cluster.sh wrote, or None if the head is not running."""
    return read_env_file(os.path.join(RUN, "ray", "env"))


def require_ray():
    return required(ray_env(), "Ray is not running: tools/ray-cluster.sh start")


def lsf_env():
    """The env file tools/lsf-pac.sh wrote, or None if the simulator is not running."""
    return read_env_file(os.path.join(RUN, "lsf", "env"))


def require_lsf():
    return required(lsf_env(), "the LSF PAC simulator is not running: tools/lsf-pac.sh start")


def quantum_env():
    """The env file tools/quantum-runtime.sh wrote, or None if the simulator is not running."""
    return read_env_file(os.path.join(RUN, "quantum", "env"))


def require_quantum():
    return required(quantum_env(), "the Qiskit Runtime simulator is not running: tools/quantum-runtime.sh start")


def sshd_env():
    """The env file tools/sshd.sh wrote (the login node's address, user, client key and known_hosts),
    or None if it is not running."""
    return read_env_file(os.path.join(RUN, "sshd", "env"))


def require_sshd():
    return required(sshd_env(), "the login node's sshd is not running: tools/sshd.sh start")


def s3_env():
    """The env file tools/s3.sh wrote (endpoint, credentials, CA bundle, data dir), or None if the S3
    server is not running."""
    return read_env_file(os.path.join(RUN, "s3", "env"))


def require_s3():
    return required(s3_env(), "the S3 server is not running: tools/s3.sh start")


def kube_control_plane_env():
    """The env file tools/kube-control-plane.sh wrote, if its apiserver answers, else None.

    A module starts the control plane only when this is None: `start` on a control plane whose
    /readyz is slow to answer (a loaded machine) restarts all of it, under every test using it."""
    values = read_env_file(os.path.join(RUN, "kube", "env"))
    if values is None:
        return None
    from kubernetes import client, config

    try:
        client.VersionApi(config.new_client_from_config(config_file=values["KUBECONFIG"])).get_code(_request_timeout=60)
    except Exception:  # pylint: disable=broad-exception-caught  # an env file left by a stopped control plane
        return None
    return values


def kube_node_env():
    """The env file of the node tools/kube-node.sh runs (KUBE_NODE_NAME, and the control plane's
    values) when it runs, else None: only then are Jobs run, not just stored."""
    status = subprocess.run([os.path.join(REPO, "tools", "kube-node.sh"), "status"], capture_output=True, text=True,
                            check=False, env=dict(os.environ, BRIDGE_RUN=RUN))
    if not status.stdout.startswith("node ") or " running " not in status.stdout:
        return None
    values = read_env_file(os.path.join(RUN, "kube", "node", "env"))
    return values if values and values.get("KUBE_NODE_NAME") else None


def require_kube_node():
    return required(kube_node_env(), "no Kubernetes node is running: tools/kube-control-plane.sh start && tools/kube-node.sh start")


def kube_namespace(values, prefix, restricted=True):
    """A fresh namespace on that cluster, enforcing the `restricted` Pod Security level."""
    import uuid

    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(config_file=values["KUBECONFIG"]))
    name = "%s-%s" % (prefix, uuid.uuid4().hex[:8])
    labels = {"bridge.dev/test": prefix}
    if restricted:
        labels["pod-security.kubernetes.io/enforce"] = "restricted"
    api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels)))
    # Pods need the namespace's "default" ServiceAccount, which the controller-manager creates.
    for _attempt in range(300):
        try:
            api.read_namespaced_service_account("default", name)
            break
        except client.exceptions.ApiException:
            time.sleep(0.1)
    return name


@contextlib.contextmanager
def private_service(script, service, settings):
    """A second instance of a service, started by this tree's tools/<script> in a run dir of its own
    with `settings` (its BRIDGE_* variables: ports, auth, knobs); yields the path of its env file
    (<run>/<service>/env). Stopped (by its recorded PIDs) and removed afterwards."""
    run_dir = tempfile.mkdtemp(prefix="brt-", dir="/tmp")
    # Not mkdtemp's 0700: as in the shared run dir, the local accounts a service runs jobs as (the LSF
    # simulator's bridge and bridgeother) must reach their job dirs below it.
    os.chmod(run_dir, 0o755)
    env = dict(os.environ, BRIDGE_RUN=run_dir, **settings)
    script = os.path.join(REPO, "tools", script)
    subprocess.run([script, "start"], env=env, check=True)
    try:
        yield os.path.join(run_dir, service, "env")
    finally:
        subprocess.run([script, "stop"], env=env, check=False)
        shutil.rmtree(run_dir, ignore_errors=True)


@contextlib.contextmanager
def one_at_a_time(name):
    """Held by one process of the machine at a time (an flock on /tmp/bridge-<name>.lock): what two
    test modules running at the same time, or two work trees' runs, must not do at once."""
    with open(os.path.join("/tmp", "bridge-%s.lock" % name), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# Two sandboxed 22.05 clusters at once fail their jobs (JobLaunchFailure): 22.05 runs the host's own
# Slurm packages, not a chroot's. Held while one runs (tools/lib/slurm-sandbox.sh).
SANDBOXED_HOST_CLUSTER = "slurm-sandbox-22.05"


def private_ray_head(ports, **settings):
    """A second Ray head on `ports` (BRIDGE_RAY_*_PORT) with `settings` (e.g. BRIDGE_RAY_AUTH="token")."""
    return private_service("ray-cluster.sh", "ray", dict(ports, **settings))


def adhoc_with_env_file(env_file, module, *args, **options):
    """`set -a; . ENV_FILE; set +a; ansible localhost -m MODULE ARGS...` as a user types it, with
    nothing else in the environment but what finds the venv and this collection; killed after
    options["timeout"] seconds (120)."""
    env = {
        "PATH": VENV_BIN + os.pathsep + "/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "ANSIBLE_COLLECTIONS_PATH": COLLECTIONS,
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
        "ANSIBLE_NOCOLOR": "1",
    }
    command = 'set -a; . "$1"; set +a; shift; exec ansible localhost -m "$@"'
    return subprocess.run(["bash", "-c", command, "adhoc", env_file, module] + list(args),
                          env=env, capture_output=True, text=True, timeout=options.get("timeout", 120), check=False)


def adhoc_result(completed):
    """The module's result from `ansible localhost -m ...` output ("localhost | SUCCESS => {...}"),
    or None when it did not succeed."""
    head, sep, body = completed.stdout.partition(" => ")
    if completed.returncode != 0 or not sep or "SUCCESS" not in head:
        return None
    return json.loads(body)


def ansible_env(extra=None):
    env = dict(os.environ)
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": COLLECTIONS,
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        "PATH": VENV_BIN + os.pathsep + env.get("PATH", ""),
    })
    env.update(extra or {})
    return env


def start_playbook(playbook, extra_vars, env, log_path):
    """Start ansible-playbook in the background; returns the Popen (output goes to log_path)."""
    # Extra vars may hold a token: a 0600 file keeps it out of the process list.
    vars_path = log_path + ".vars.json"
    with os.fdopen(os.open(vars_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as handle:
        json.dump(extra_vars, handle)
    args = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local", playbook, "-e", "@" + vars_path]
    log = open(log_path, "w")
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=os.path.dirname(playbook))


class Relay:
    """A TCP relay to host:port that counts connections. cut() severs every open connection and
    refuses new ones (they are accepted and closed at once) until restore(); after close() the port
    is refused. TLS runs end to end through it, unless `tls` (a server-side ssl.SSLContext) is
    given: then the relay terminates TLS and speaks plain TCP to the target."""

    def __init__(self, target, tls=None):
        self.target = target
        self.tls = tls
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.lock = threading.Lock()
        self.open_sockets = set()
        self.accepting = True
        self.connections = 0
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @classmethod
    def to(cls, url, tls=None):
        """A relay to the host and port of an http(s) URL."""
        host, port = url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)
        return cls((host, int(port)), tls=tls)

    @property
    def url(self):
        return "%s://127.0.0.1:%d" % ("https" if self.tls else "http", self.port)

    def _accept(self):
        while True:
            try:
                client = self.server.accept()[0]
            except OSError:
                return
            # The client socket is registered before the upstream one is opened, and the pair is
            # re-checked after, so a cut() racing with a connection being set up still severs it.
            with self.lock:
                if not self.accepting:
                    client.close()
                    continue
                self.open_sockets.add(client)
            upstream = socket.create_connection(self.target, timeout=10)
            upstream.settimeout(None)  # a watch is idle for long stretches
            with self.lock:
                severed = not self.accepting or client not in self.open_sockets
                self.open_sockets.add(upstream)
                self.connections += 1
            if severed:
                self._kill(client)
                self._kill(upstream)
                continue
            if self.tls:
                threading.Thread(target=self._tls_pipe, args=(client, upstream), daemon=True).start()
                continue
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    def _pipe(self, source, sink):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                self._kill(sock)

    def _tls_pipe(self, client, upstream):
        """Both directions of a TLS connection in one thread: an SSL object is not to be used by
        two threads at once. A failed handshake (a client that rejects the certificate) ends it."""
        try:
            client.settimeout(10)
            tls = self.tls.wrap_socket(client, server_side=True)  # closes the socket when it fails
            tls.settimeout(None)
        except OSError:
            with self.lock:
                self.open_sockets.discard(client)
            self._kill(upstream)
            return
        # wrap_socket() took over the file descriptor: cut() must now shut the TLS socket down.
        with self.lock:
            self.open_sockets.discard(client)
            severed = upstream not in self.open_sockets
            self.open_sockets.add(tls)
        try:
            while not severed:
                readable = [tls] if tls.pending() else select.select([tls, upstream], [], [])[0]
                for source, sink in ((tls, upstream), (upstream, tls)):
                    if source in readable:
                        data = source.recv(65536)
                        if not data:
                            severed = True
                            break
                        sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (tls, upstream):
                self._kill(sock)
            tls.close()

    def _kill(self, sock):
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        with self.lock:
            self.open_sockets.discard(sock)

    def cut(self):
        with self.lock:
            self.accepting = False
            sockets = list(self.open_sockets)
        for sock in sockets:
            self._kill(sock)

    def restore(self):
        with self.lock:
            self.accepting = True

    def close(self):
        self.cut()
        # shutdown() wakes the thread blocked in accept(); close() alone would leave the port
        # listening until that accept() returns.
        try:
            self.server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.server.close()
        self.thread.join(10)

    def refused(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=5).close()
        except ConnectionRefusedError:
            return True
        return False


def make_certificates(directory):
    """A throwaway CA and a certificate for 127.0.0.1 (IP SAN) it signed, made with openssl in
    `directory`: returns (ca.crt path, server ssl.SSLContext)."""
    import ssl

    def openssl(*args):
        subprocess.run(("openssl",) + args, cwd=str(directory), check=True, capture_output=True)

    key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    openssl("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=Bridge test CA")
    openssl("req", *key, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1")
    with open(os.path.join(str(directory), "san.ext"), "w") as handle:
        handle.write("subjectAltName = IP:127.0.0.1\nbasicConstraints = CA:FALSE\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.crt", "-days", "2", "-extfile", "san.ext")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(os.path.join(str(directory), "server.crt"), os.path.join(str(directory), "server.key"))
    return os.path.join(str(directory), "ca.crt"), context


# ------------------------------------------------------------------ ansible-inventory

def ansible_inventory(path, values, *args):
    """Run ansible-inventory --list; the inventory goes to a file (-vvv output would mix with it)."""
    output = path + ".out.json"
    if os.path.exists(output):
        os.remove(output)
    env = ansible_env(values)
    # A plugin failure must fail the command, not leave an empty inventory behind a warning.
    env.update({"ANSIBLE_INVENTORY_UNPARSED_FAILED": "1", "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "1"})
    result = subprocess.run(
        [os.path.join(VENV_BIN, "ansible-inventory"), "-i", path, "--list", "--output", output] + list(args),
        env=env, capture_output=True, text=True, timeout=300, cwd=os.path.dirname(path), check=False)
    result.listing = ""
    if os.path.exists(output):
        with open(output) as handle:
            result.listing = handle.read()
    return result


def write_inventory_file(directory, filename, config):
    """An inventory source: config as YAML in directory/filename; returns its path."""
    path = os.path.join(str(directory), filename)
    with open(path, "w") as handle:
        yaml.safe_dump(config, handle)
    return path


def listed(result):
    assert result.returncode == 0, "ansible-inventory failed:\n%s\n%s" % (result.stdout[-3000:], result.stderr[-3000:])
    return json.loads(result.listing)


def everything(result):
    return result.stdout + result.stderr + result.listing


def unwrap(value):
    """ansible-inventory prints unsafe strings as {"__ansible_unsafe": ...}; compare plain values."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return dict((k, unwrap(v)) for k, v in value.items())
    if isinstance(value, list):
        return [unwrap(v) for v in value]
    return value


def rename(value, names):
    if isinstance(value, dict):
        return dict((names.get(k, k), rename(v, names)) for k, v in value.items())
    if isinstance(value, list):
        return [rename(v, names) for v in value]
    if isinstance(value, str):
        return names.get(value, value)
    return value


def mask_capacity(variables, keys, volatile="<volatile>"):
    """A host's bridge_capacity with the values of `keys` (what a running service changes on its
    own, or what differs between machines) replaced by `volatile`."""
    record = variables.get("bridge_capacity")
    if isinstance(record, dict):
        for key in keys:
            record[key] = volatile


def compare_with_golden(path, inventory):
    """inventory against the golden file at path; BRIDGE_UPDATE_GOLDEN=1 writes it instead."""
    text = json.dumps(inventory, indent=2, sort_keys=True) + "\n"
    if os.environ.get("BRIDGE_UPDATE_GOLDEN") == "1":
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(text)
        return
    if not os.path.exists(path):
        pytest.fail("no golden file %s; create it with BRIDGE_UPDATE_GOLDEN=1" % path)
    with open(path) as handle:
        golden = json.load(handle)
    assert inventory == golden, "inventory differs from %s; if the change is intended, rerun with BRIDGE_UPDATE_GOLDEN=1" % path


def check_cached_inventory_needs_no_backend(tmp_path, url, token, write_inventory, run_inventory):
    """Second run: same file, backend unreachable, cache valid -> same inventory, no request.

    write_inventory(directory, **overrides) writes the inventory file, run_inventory(path, *args)
    runs ansible-inventory on it; the backend at url is reached through a relay that is then closed.
    """
    cache_dir = tmp_path / "cache"
    relay = Relay.to(url)
    try:
        path = write_inventory(tmp_path, url=relay.url, cache=True, cache_plugin="ansible.builtin.jsonfile",
                               cache_connection=str(cache_dir), cache_timeout=3600)
        first = run_inventory(path, "-vvv")
        fresh = listed(first)
        assert relay.connections > 0
    finally:
        relay.close()
    seen = relay.connections
    assert relay.refused(), "the relay port still accepts connections"

    second = run_inventory(path)
    assert listed(second) == fresh
    assert relay.connections == seen

    flushed = run_inventory(path, "--flush-cache")
    assert flushed.returncode != 0, "with the cache flushed, the closed port must make the run fail"
    assert "Failed to" in flushed.stdout + flushed.stderr

    for result in (first, second, flushed):
        assert token not in everything(result), "the token leaked into ansible-inventory output"
    cached = [os.path.join(str(cache_dir), name) for name in os.listdir(str(cache_dir))]
    assert cached
    for name in cached:
        with open(name) as handle:
            assert token not in handle.read(), "the token leaked into the inventory cache"
