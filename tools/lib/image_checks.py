"""Checks of the controller image from inside it, as deploy/deployment.yaml runs it.

Run by tools/controller-image.sh check, in the container (the image's Python, its uid, read-only
root, the Deployment's env and volumes, no network):

    python - "CONTAINER_PORTS" "MOUNT_PATHS" DEPLOYMENT_ARG...

Prints what it checked to stderr; exits non-zero on the first failure.
"""

import http.server
import json
import os
import secrets
import subprocess
import sys
import threading
import time

from bridge_controller import collection
from bridge_controller.main import parse_args
from bridge_controller.runner import AnsibleRunner

PLAYBOOKS = ("bridgejob_submit.yml", "bridgejob_poll.yml", "bridgejob_cancel.yml")
START = time.monotonic()


def say(message):
    sys.stderr.write("image-checks: [%3ds] ok: %s\n" % (time.monotonic() - START, message))


def on_volume(path, mounts):
    path = os.path.realpath(path)
    return any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts)


def check_args(args, ports, mounts):
    for playbook in PLAYBOOKS:
        assert os.path.isfile(os.path.join(args.playbook_dir, playbook)), (args.playbook_dir, playbook)
    say("--playbook-dir resolves to %s, which holds %s" % (args.playbook_dir, ", ".join(PLAYBOOKS)))
    assert str(args.port) in ports, (args.port, ports)
    say("--http-port %s = containerPort" % args.port)
    installed = os.path.join(args.collections_path, "ansible_collections", "bridge", "hpc")
    assert collection.imported_from() == os.path.realpath(installed), (collection.imported_from(), installed)
    say("the controller imports bridge.hpc from %s, the collection its playbooks run" % installed)
    assert args.python.startswith("/usr/local/bin/python"), args.python
    writable = {"--runner-dir": args.work_dir}
    for key in ("HOME", "ANSIBLE_HOME", "ANSIBLE_LOCAL_TEMP", "ANSIBLE_REMOTE_TEMP"):
        if os.environ.get(key):
            writable[key] = os.environ[key]
    for name, path in writable.items():
        assert on_volume(path, mounts), "%s=%s is on no volume (%s)" % (name, path, mounts)
    try:
        open("/bridge-image-check", "w").close()
    except OSError:
        pass
    else:
        raise AssertionError("the root filesystem is writable")
    say("root read-only; %s on volumes" % ", ".join("%s=%s" % kv for kv in writable.items()))


def check_syntax(args):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=args.collections_path,
               ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false", ANSIBLE_LOCALHOST_WARNING="0",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    for playbook in PLAYBOOKS:
        subprocess.run(["ansible-playbook", "--syntax-check", "-i", "localhost,",
                        os.path.join(args.playbook_dir, playbook)],
                       env=env, check=True, stdout=subprocess.DEVNULL)
    say("ansible-playbook --syntax-check of the 3 playbooks, collections from %s only" % args.collections_path)


def stub_ray(token, seen):
    """A stub of Ray's GET /api/jobs/ (not Ray) on the container's loopback."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            authorized = self.headers.get("Authorization") == "Bearer " + token
            seen.append((self.path, authorized))
            if not authorized:
                code, body = 401, "missing token"
            elif self.path.split("?")[0] == "/api/jobs/":
                code, body = 200, "[]"
            else:
                code, body = 404, "not found"
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args):
            pass
    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return "http://127.0.0.1:%d" % server.server_port


def check_poll(args):
    token, seen = "image-check-" + secrets.token_hex(8), []
    url = stub_ray(token, seen)
    runner = AnsibleRunner(args.playbook_dir, args.work_dir, collections_path=args.collections_path,
                           rotate_artifacts=args.rotate_artifacts, python=args.python)
    result = runner.run("poll", {"type": "ray", "url": url}, {"token": token},
                        identities=["00000000-image-check"])
    assert not result.get("failed"), json.dumps(result)
    assert result.get("jobs") == {} and result.get("missing") == ["00000000-image-check"], result
    assert ("/api/jobs/", True) in seen, seen
    say("AnsibleRunner ran bridgejob_poll.yml (bridge.hpc.job_info) as uid %d against a stub Ray API: "
        "token handed over through the pipe, result missing=[00000000-image-check]" % os.getuid())


def main():
    ports, mounts, argv = sys.argv[1].split(), sys.argv[2].split(), sys.argv[3:]
    args = parse_args(argv)
    check_args(args, ports, mounts)
    check_syntax(args)
    check_poll(args)


if __name__ == "__main__":
    main()
