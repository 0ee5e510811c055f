"""_output.tail: what results and status show of a job's output; the jobs lifecycle's reading of it
(once, for a finished job, never a running one); the backends' refusals; the login node's ssh command."""

import os
import stat
import uuid

import pytest

from ansible_collections.bridge.hpc.plugins.module_utils import _login
from ansible_collections.bridge.hpc.plugins.module_utils._errors import (
    AuthFailed,
    ConnectionFailed,
    NotFound,
    SpecError,
    Unsupported,
)
from ansible_collections.bridge.hpc.plugins.module_utils._jobs import ensure_many_present, ensure_present
from ansible_collections.bridge.hpc.plugins.module_utils._output import MASK, clean, scrub, secret_values, tail
from ansible_collections.bridge.hpc.plugins.module_utils._registry import BACKENDS
from ansible_collections.bridge.hpc.plugins.module_utils._spec import normalize_spec

from fake_backend import FakeBackend

NO_SLEEP = dict(sleep=lambda s: None)


# ---------------------------------------------------------------- tail


def test_tail_keeps_the_last_lines_and_says_so():
    assert tail(b"a\nb\nc\n", 2) == {"text": "b\nc\n", "lines": 2, "truncated": True}
    assert tail(b"a\nb\nc\n", 3) == {"text": "a\nb\nc\n", "lines": 3, "truncated": False}
    assert tail(b"a\nb\nc", 5) == {"text": "a\nb\nc\n", "lines": 3, "truncated": False}
    assert tail(b"", 5) == {"text": "", "lines": 0, "truncated": False}


def test_tail_of_the_end_a_backend_read_is_truncated():
    assert tail(b"x\n", 5, partial=True)["truncated"] is True


def test_unicode_passes_and_bytes_that_are_not_utf8_become_replacement_characters():
    result = tail("π ≈ 3.14 ✓ 日本\n".encode("utf-8") + b"bad \xff\xfe end\n", 10)
    assert result["text"] == u"π ≈ 3.14 ✓ 日本\nbad \ufffd\ufffd end\n"


def test_control_characters_and_terminal_escapes_are_removed_but_tabs_and_newlines_stay():
    data = b"\x1b[31mred\x1b[0m\tcol\x00umn\r\nbell\x07 \x1b]0;title\x07back\x08space\x7f\n\x1bcreset\n"
    assert tail(data, 10)["text"] == u"red\tcolumn\nbell backspace\nreset\n"


def test_secrets_are_masked_before_anything_is_cut():
    secret = "hunter2-very-secret"
    data = ("line %s\n" % secret) * 3
    result = tail(data.encode(), 2, secrets=[secret])
    assert secret not in result["text"] and result["text"] == u"line %s\nline %s\n" % (MASK, MASK)
    # A secret printed with an escape inside it is masked too.
    assert secret not in tail(("hunter2-\x1b[1mvery-secret\n").encode(), 5, secrets=[secret])["text"]


def test_short_values_are_not_secrets_worth_masking():
    assert scrub("a1b2", ["1", "ab"]) == "a1b2"
    assert scrub("tok=abcd", ["abcd"]) == "tok=" + MASK


def test_a_secret_that_holds_another_is_masked_whole():
    assert scrub("x LONGSECRET y", ["SECRET", "LONGSECRET"]) == "x %s y" % MASK


def test_environment_values_whose_names_look_secret():
    env = {"API_TOKEN": "t0k3n!", "DB_PASSWORD": "pw123", "AWS_SECRET_ACCESS_KEY": "ak", "PASSWD": "p4ss",
           "GH_CREDENTIALS": "cred", "SSH_KEY": "k3y!", "PATH": "/bin", "NAME": "alice", "EMPTY_TOKEN": ""}
    assert sorted(secret_values(env)) == sorted(["t0k3n!", "pw123", "ak", "p4ss", "cred", "k3y!"])


def test_at_most_4096_bytes_of_whole_lines():
    data = "".join("%04d %s\n" % (i, "é" * 40) for i in range(200)).encode("utf-8")
    result = tail(data, 1000)
    assert len(result["text"].encode("utf-8")) <= 4096 and result["truncated"] is True
    assert result["text"].startswith("0") and result["text"].endswith("0199 %s\n" % ("é" * 40))
    assert result["lines"] == result["text"].count("\n")


def test_one_line_longer_than_4096_bytes_keeps_its_end_at_a_character_boundary():
    result = tail(("日" * 3000 + "END\n").encode("utf-8"), 5)
    assert result["text"].endswith("END\n") and len(result["text"].encode("utf-8")) <= 4096
    assert result["lines"] == 1 and result["truncated"] is True
    result["text"].encode("utf-8")   # whole characters only


def test_clean_keeps_text_as_it_is_otherwise():
    assert clean(u"plain\ttext\n") == u"plain\ttext\n"


# ---------------------------------------------------------------- the lifecycle


class OutputBackend(FakeBackend):
    """A FakeBackend whose jobs print; counts reads."""

    CAPABILITIES = frozenset(["logs"])

    def __init__(self, data=b"one\ntwo\nthree\n", **kwargs):
        super(OutputBackend, self).__init__(**kwargs)
        self.data = data
        self.reads = []

    def read_output(self, job, tail_lines):
        self.reads.append((job["job_id"], tail_lines))
        return self.data, False


def spec_with(**fields):
    params = {"script": "#!/bin/bash\necho $API_TOKEN\n", "name": "out", "output": {"tail_lines": 2}}
    params.update(fields)
    return normalize_spec(params)


def test_a_waited_job_that_finished_returns_its_output_read_once():
    backend = OutputBackend(data=b"token is secret-token-value\nlast\n")
    result = ensure_present(backend, spec_with(environment={"API_TOKEN": "secret-token-value"}), wait=True,
                            poll_interval=0.01, **NO_SLEEP)
    assert result["output"] == {"text": u"token is %s\nlast\n" % MASK, "lines": 2, "truncated": False}
    assert len(backend.reads) == 1


def test_a_running_job_is_not_read():
    backend = OutputBackend()
    result = ensure_present(backend, spec_with())
    assert "output" not in result and "output_error" not in result and backend.reads == []


def test_without_output_in_the_spec_nothing_is_read():
    backend = OutputBackend()
    ensure_present(backend, normalize_spec({"script": "#!/bin/bash\ntrue\n"}), wait=True, **NO_SLEEP)
    assert backend.reads == []


def test_output_that_cannot_be_read_is_an_output_error_and_the_task_stands():
    backend = OutputBackend()

    def broken(job, tail_lines):
        raise NotFound("no such file", "read", "job output", "/x", "Fake", "fake://")

    backend.read_output = broken
    result = ensure_present(backend, spec_with(), wait=True, **NO_SLEEP)
    assert result["failed"] is False and "no such file" in result["output_error"]


def test_a_backend_that_cannot_read_output_refuses_the_spec_before_submitting():
    backend = FakeBackend()   # no logs capability
    with pytest.raises(SpecError) as refused:
        ensure_present(backend, spec_with())
    assert refused.value.field == "output" and backend.submits == []
    item = ensure_many_present(backend, [spec_with(identity="b1")])[0]
    assert item["failed"] is True and item["error"]["reason"].startswith("output: not supported")


def test_a_batch_reads_the_output_of_a_job_it_finds_finished():
    backend = OutputBackend()
    spec = spec_with(identity="done-1")
    ensure_present(backend, spec, wait=True, **NO_SLEEP)
    backend.reads = []
    item = ensure_many_present(backend, [spec])[0]
    assert item["output"]["text"] == u"two\nthree\n" and len(backend.reads) == 1


def test_slurm_refuses_output_without_a_login_node_and_lsf_without_stdout():
    slurm = BACKENDS["slurm"].__new__(BACKENDS["slurm"])
    assert "login" in slurm.output_refusal({"output": {"tail_lines": 5}})
    slurm.login = _login.LoginNode("login1", known_hosts="x")
    assert slurm.output_refusal({}) is None
    lsf = BACKENDS["lsf"].__new__(BACKENDS["lsf"])
    assert "stdout" in lsf.output_refusal({"stdout": None})
    assert lsf.output_refusal({"stdout": "out-%J.txt"}) is None
    for name in ("ray", "kubernetes", "quantum"):
        assert BACKENDS[name].__new__(BACKENDS[name]).output_refusal({}) is None, name


# ---------------------------------------------------------------- the login node


def test_login_option_is_checked_naming_the_suboption():
    with pytest.raises(SpecError) as missing:
        _login.LoginNode.from_option({"host": "login1"})
    assert missing.value.field == "login.known_hosts"
    for bad, field in (({"host": "-oProxyCommand=x", "known_hosts": "k"}, "login.host"),
                       ({"host": "h", "user": "-l", "known_hosts": "k"}, "login.user"),
                       ({"host": "h", "port": 0, "known_hosts": "k"}, "login.port"),
                       ({"host": "h", "known_hosts": "k", "known_hosts_file": "/f"}, "login.known_hosts"),
                       ({"host": "h", "known_hosts": "k", "private_key": "p", "private_key_file": "/f"}, "login.private_key"),
                       ({"host": "h", "known_hosts": "k", "path": "/x"}, "login")):
        with pytest.raises(SpecError) as refused:
            _login.LoginNode.from_option(bad)
        assert refused.value.field == field, bad


def test_login_only_for_slurm():
    ray = BACKENDS["ray"].__new__(BACKENDS["ray"])
    with pytest.raises(SpecError) as refused:
        _login.attach_login(ray, {"login": {"host": "h", "known_hosts": "k"}})
    assert refused.value.field == "login"


def fake_ssh(tmp_path, script):
    """An executable standing in for ssh: it records its arguments and the files it was given."""
    path = tmp_path / "ssh"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return str(path)


def test_the_ssh_command_checks_host_keys_and_reads_the_end_of_the_file(tmp_path):
    record = tmp_path / "args"
    ssh = fake_ssh(tmp_path, 'for a; do echo "$a"; done > %s\n'
                             'for a; do case "$a" in UserKnownHostsFile=*) cat "${a#UserKnownHostsFile=}" >> %s.kh;; esac; done\n'
                             'printf "0123456789"\n' % (record, record))
    node = _login.LoginNode("login1", 2222, "alice", private_key="-----KEY-----", known_hosts="[login1]:2222 ssh-ed25519 AAA",
                            ssh=ssh)
    data, partial = node.read_end("/home/alice/it's here.out", 4)
    assert (data, partial) == (b"6789", True)
    args = record.read_text().splitlines()
    for option in ("BatchMode=yes", "StrictHostKeyChecking=yes", "GlobalKnownHostsFile=/dev/null", "IdentitiesOnly=yes"):
        assert option in args
    assert args[args.index("-F") + 1] == "/dev/null" and args[args.index("-p") + 1] == "2222"
    assert args[-3:-1] == ["--", "login1"]
    assert args[-1] == "LC_ALL=C tail -c 5 -- '/home/alice/it'\"'\"'s here.out'"
    assert (tmp_path / "args.kh").read_text() == "[login1]:2222 ssh-ed25519 AAA\n"
    # The key's file is gone with the command.
    key = args[args.index("-i") + 1]
    assert not os.path.exists(key) and not os.path.exists(os.path.dirname(key))


@pytest.mark.parametrize("stderr, rc, kind", [
    ("Host key verification failed.", 255, AuthFailed),
    ("alice@login1: Permission denied (publickey).", 255, AuthFailed),
    ("ssh: connect to host login1 port 22: Connection refused", 255, ConnectionFailed),
    ("tail: cannot open '/x' for reading: No such file or directory", 1, NotFound),
])
def test_ssh_failures_are_typed(tmp_path, stderr, rc, kind):
    node = _login.LoginNode("login1", known_hosts="k", ssh=fake_ssh(tmp_path, 'echo "%s" >&2; exit %d\n' % (stderr, rc)))
    with pytest.raises(kind) as failed:
        node.read_end("/x", 10)
    assert "login node" in str(failed.value)


def test_a_private_key_is_written_for_the_user_only_and_never_in_a_message(tmp_path):
    secret = "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret-%s\n-----END OPENSSH PRIVATE KEY-----" % uuid.uuid4().hex
    ssh = fake_ssh(tmp_path, 'for a; do case "$a" in -i) next=1;; *) [ "$next" = 1 ] && { stat -c %%a "$a" > %s; '
                             'cat "$a" >&2; next=;};; esac; done; exit 255\n' % (tmp_path / "mode"))
    node = _login.LoginNode("login1", private_key=secret, known_hosts="k", ssh=ssh)
    with pytest.raises(ConnectionFailed) as failed:
        node.read_end("/x", 10)
    assert (tmp_path / "mode").read_text().strip() == "600"
    assert "secret-" not in str(failed.value)


def test_no_ssh_where_the_module_runs_is_said(tmp_path):
    node = _login.LoginNode("login1", known_hosts="k", ssh=str(tmp_path / "missing-ssh"))
    with pytest.raises(Unsupported) as failed:
        node.read_end("/x", 10)
    assert "openssh-client" in str(failed.value)


def test_temporary_files_are_private(tmp_path):
    path = _login.LoginNode._private_file(str(tmp_path), "id", "key")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and open(path).read() == "key\n"


# ---------------------------------------------------------------- the pipe


def take(tmp_path, document, backend="slurm", login=True):
    import json
    import threading

    from ansible_collections.bridge.hpc.plugins.module_utils._handoff import take_handoff

    class Module:
        def __init__(self, **params):
            self.params = dict(handoff_timeout=10, **params)
            self.no_log_values = set()

    pipe = str(tmp_path / uuid.uuid4().hex)
    os.mkfifo(pipe, 0o600)
    params = dict(handoff_pipe=pipe, backend=backend, identities=None, token=None)
    if login:
        params["login"] = None
    module = Module(**params)
    writer = threading.Thread(target=lambda: open(pipe, "w").write(json.dumps(document)))
    writer.start()
    try:
        take_handoff(module, {"identities": list, "output_lines": dict, "output_secrets": dict})
    finally:
        writer.join()
    return module


def test_a_handed_over_login_node_is_content_and_its_key_is_scrubbed(tmp_path):
    login = {"host": "login1", "port": 22, "user": "alice", "known_hosts": "login1 ssh-ed25519 AAAA",
             "private_key": "-----KEY-----"}
    module = take(tmp_path, {"identities": ["a"], "login": login, "output_lines": {"a": 5},
                             "output_secrets": {"a": ["env-secret"]}})
    assert module.params["login"] == login and module.params["output_lines"] == {"a": 5}
    assert {"-----KEY-----", "env-secret"} <= module.no_log_values
    with pytest.raises(SpecError) as refused:
        take(tmp_path, {"identities": ["a"], "login": dict(login, private_key_file="/etc/shadow")})
    assert "private_key_file" in str(refused.value)
    with pytest.raises(SpecError) as refused:
        take(tmp_path, {"identities": ["a"], "login": login}, backend="ray")
    assert "unexpected keys login" in str(refused.value)
