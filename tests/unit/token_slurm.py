"""A Slurm that accepts only some tokens, for the token_file tests of the client and the modules.

It replays responses recorded from real Slurm 22.05 (v0.0.38) and 24.11 (v0.0.42)
(tests/unit/fixtures/slurm) and refuses other tokens the way that release does (22.05: a bare
HTTP 500; 24.11: HTTP 511).
"""

import httpx

from recorded import recorded

OLD, NEW = "eyJold.token.aaaaaaaa", "eyJnew.token.bbbbbbbb"


class TokenSlurm:
    """One Slurm release over MockTransport: accepts the tokens in `accepted`, answers GET job/N with
    the recorded cases in `job_cases` (in turn, the last one for ever), the job list with or without
    the job that carries identity fixture-ok, a submit with the recorded new job, and ping, partitions
    and nodes.

    `before_job_get` hooks run before a GET of the job answers, one per GET: they expire tokens
    and rotate files as a test needs."""

    def __init__(self, version, accepted=(OLD,), job_cases=("job_running", "job_completed"), listed=False):
        self.version = version
        self.accepted = set(accepted)
        self.job_cases = list(job_cases)
        self.listed = listed
        self.sent = []
        self.accounting_asked = []
        self.before_job_get = []
        self.echo_token_in_errors = False

    def refusal(self):
        if self.version == "v0.0.38":
            answer = recorded("slurm", "v0.0.38", "ping_bad_token")   # 500, "Unspecified error" (-1)
        else:
            answer = recorded("slurm", self.version, "submit_bad_token")  # 511, error 1007
        return httpx.Response(answer["status"], json=answer["body"])

    def answer(self, case):
        fixture = recorded("slurm", self.version, case)
        return httpx.Response(fixture["status"], json=fixture["body"])

    def handler(self, request):
        token = request.headers.get("x-slurm-user-token")
        path = request.url.path
        if path.startswith("/slurmdb/"):
            # A cluster without accounting (the lookups then list slurmctld's jobs); kept apart
            # from `sent`, which the tests compare request by request.
            self.accounting_asked.append((request.method, path))
            fixture = recorded("slurm", self.version, "slurmdb_absent")
            return httpx.Response(fixture["status"], text=fixture["body"])
        self.sent.append((request.method, path.split("/", 3)[-1], token))
        is_job_get = request.method == "GET" and "/job/" in path
        if is_job_get and self.before_job_get:
            self.before_job_get.pop(0)()
        if token not in self.accepted:
            return self.refusal()
        if self.echo_token_in_errors:
            return httpx.Response(500, json={"errors": [{"error": "boom for %s" % token, "error_number": 9}]})
        if is_job_get:
            case = self.job_cases.pop(0) if len(self.job_cases) > 1 else self.job_cases[0]
            return self.answer(case)
        if path.endswith("/job/submit"):
            return self.answer("submit_ok")
        for case in ("ping", "partitions", "nodes"):   # discovery and the preflight check
            if path.endswith("/%s/" % case):
                return self.answer(case)
        if path.endswith("/jobs/"):
            fixture = recorded("slurm", self.version, "jobs_list")
            body = dict(fixture["body"])
            if not self.listed:
                body["jobs"] = [j for j in body["jobs"] if j.get("comment") != "bridge:fixture-ok"]
            return httpx.Response(200, json=body)
        raise AssertionError("unexpected request %s %s" % (request.method, path))

    def methods(self):
        return [(method, what) for method, what, _token in self.sent]

    def tokens(self):
        return [token for _method, _what, token in self.sent]


def token_file(directory, text):
    """A token file holding `text`; the returned write(text) replaces it as a rotator does (a new
    file, then a rename), and its `path` names it."""
    path = directory / "slurm_jwt"

    def write(new_text):
        partial = directory / "slurm_jwt.new"
        partial.write_text(new_text)
        partial.replace(path)

    write(text)
    write.path = str(path)
    return write
