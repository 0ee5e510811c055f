"""bridge.hpc.workflow_plan: the checks a workflow passes before anything is submitted, and the order."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.bridge.hpc.plugins.filter.workflow_plan import workflow_plan

SLURM = {"url": "http://127.0.0.1:6820", "user": "bridge", "token": "jwt-s3cret"}


def step(name, backend="slurm", after=None, **fields):
    fields.update(name=name, backend=backend)
    if after is not None:
        fields["after"] = after
    return fields


def refused(steps, workflow="wf", backends=None):
    with pytest.raises(AnsibleFilterError) as caught:
        workflow_plan(steps, workflow, backends)
    message = str(caught.value)
    assert message.endswith("nothing was submitted")
    return message


def test_steps_run_after_what_they_need_and_otherwise_in_the_given_order():
    steps = [step("report", "kubernetes", after=["sim", "circuit"]), step("prepare"), step("sim", "ray", after=["prepare"]),
             step("circuit", "quantum", after="sim"), step("lone", "ray")]
    plan = workflow_plan(steps, "nightly", {"slurm": SLURM})
    assert [s["name"] for s in plan] == ["prepare", "sim", "circuit", "report", "lone"]
    assert plan[0] == {"name": "prepare", "backend": "slurm", "after": [], "identity": "nightly.prepare", "run": True,
                       "reason": None}
    assert plan[2]["after"] == ["sim"]


def test_steps_of_backends_without_settings_are_skipped_with_the_reason():
    steps = [step("prepare"), step("sim", "ray"), step("report", "kubernetes"), step("lsf", "lsf")]
    backends = {"slurm": SLURM, "ray": {"url": ""}, "kubernetes": {"kubeconfig": "/etc/kube/config"}, "lsf": {"user": "u"}}
    plan = dict((s["name"], s) for s in workflow_plan(steps, "wf", backends))
    assert plan["prepare"]["run"] and plan["report"]["run"]
    assert not plan["sim"]["run"]
    assert plan["sim"]["reason"] == "backend 'ray' is not configured: workflow_backends has no settings for it"
    assert plan["lsf"]["reason"] == "backend 'lsf' is not configured: workflow_backends.lsf.url is empty"


def test_kubernetes_needs_no_url():
    plan = workflow_plan([step("k", "kubernetes")], "wf", {"kubernetes": {"namespace": "jobs"}})
    assert plan[0]["run"]


@pytest.mark.parametrize("steps, expected", [
    ([step("a"), step("a", "ray")], "step name 'a' is used twice; step names must be unique"),
    ([step("a", "pbs")], "step 'a': backend 'pbs' is not a backend; allowed: kubernetes, lsf, quantum, ray, slurm"),
    ([step("a", after=["b"])], "step 'a': after names 'b', which is not a step; steps: a"),
    ([step("a", after=["c"]), step("b", after=["a"]), step("c", after=["b"])],
     "the steps depend on each other in a cycle: a -> c -> b -> a"),
    ([step("a", after=["a"])], "the steps depend on each other in a cycle: a -> a"),
    ([{"backend": "slurm"}], "workflow_steps[0] has no name"),
    ([step("a.b")], "workflow_steps[0].name 'a.b' must be letters, digits, '_' and '-'"),
    ([step("a", identity="x")], "step 'a': field 'identity' is not allowed (the workflow gives every job its identity"),
    ([step("a", scirpt="#!/bin/sh")], "step 'a': field 'scirpt' is not allowed; allowed: account, after, array, backend"),
    ([step("a", after=[1])], "step 'a': after must be a list of step names"),
    (["a"], "workflow_steps[0] must be a dict, got str"),
    ([], "workflow_steps must be a non-empty list of steps"),
])
def test_bad_steps_are_refused_naming_the_step_and_the_field(steps, expected):
    assert expected in refused(steps)


def test_bad_backends_and_workflow_names_are_refused():
    assert "workflow_backends.slrum is not a backend" in refused([step("a")], backends={"slrum": SLURM})
    assert "workflow_backends.slurm.tokne is not a connection setting of slurm; allowed:" in refused(
        [step("a")], backends={"slurm": {"url": "http://x", "tokne": "t"}})
    assert "workflow_name 'a b' must be letters" in refused([step("a")], workflow="a b")
    assert "longer than 128 characters" in refused([step("s" * 60)], workflow="w" * 70)


def test_no_secret_in_a_refusal():
    message = refused([step("a", after=["missing"])], backends={"slurm": SLURM})
    assert "jwt-s3cret" not in message


def test_only_name_backend_and_after_are_read():
    """The rest of a step may refer to results that do not exist yet: the plan never touches it."""

    class Untouchable(dict):
        def __getitem__(self, key):
            if key not in ("name", "backend", "after"):
                raise AssertionError("read %s" % key)
            return dict.__getitem__(self, key)

        def get(self, key, default=None):
            return self[key] if key in self else default

    plan = workflow_plan([Untouchable(name="a", backend="ray", script="{{ later }}")], "wf", {"ray": {"url": "http://r"}})
    assert plan[0]["run"]


def test_an_auto_step_is_placed_among_its_configured_candidates():
    backends = {"ray": {"url": "http://127.0.0.1:8265"}, "slurm": SLURM, "lsf": {"url": ""}}
    steps = [step("named", "auto", candidates=["lsf", "slurm"]), step("any", "auto", placement_policy="LeastQueued"),
             step("none", "auto", candidates=["lsf", "quantum"])]
    plan = dict((s["name"], s) for s in workflow_plan(steps, "wf", backends))
    assert plan["named"] == {"name": "named", "backend": "auto", "after": [], "candidates": ["slurm"], "policy": "FirstFit",
                             "identity": "wf.named", "run": True, "reason": None}
    # Without candidates: every configured backend, in the order of workflow_backends.
    assert plan["any"]["candidates"] == ["ray", "slurm"] and plan["any"]["policy"] == "LeastQueued"
    assert plan["none"]["run"] is False
    assert plan["none"]["reason"] == "none of the candidates lsf, quantum is configured in workflow_backends"


@pytest.mark.parametrize("bad, expected", [
    (step("a", "auto", candidates=["pbs"]), "step 'a': candidates must be a non-empty list of backends"),
    (step("a", "auto", candidates=[]), "step 'a': candidates must be a non-empty list of backends"),
    (step("a", "auto", placement_policy="Random"), "step 'a': placement_policy 'Random' is not a policy"),
    (step("a", "slurm", candidates=["ray"]), "step 'a': candidates is for a step with backend auto"),
])
def test_bad_auto_steps_are_refused(bad, expected):
    assert expected in refused([bad], backends={"slurm": SLURM})
