"""docs/roles.md's k8s_in_slurm example can be followed: every variable it sets is one of the role's
arguments, it gives the role a root token of its own (a user's SLURM_JWT runs the job as that user,
which cannot start a cluster), and each file it names is made by a step the page shows."""

import os
import re

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def section():
    with open(os.path.join(REPO, "docs", "roles.md")) as handle:
        text = handle.read()
    start = text.index("## bridge.hpc.k8s_in_slurm")
    return text[start:text.index("\n## ", start + 1)]


def test_the_k8s_in_slurm_example_sets_only_the_roles_arguments_and_a_root_token():
    text = section()
    play = yaml.safe_load(re.search(r"```yaml\n(.*?)```", text, re.S).group(1))[0]
    with open(os.path.join(REPO, "roles", "k8s_in_slurm", "meta", "argument_specs.yml")) as handle:
        arguments = set(yaml.safe_load(handle)["argument_specs"]["main"]["options"])
    used = set(play["vars"])
    for task in play["tasks"]:
        used.update(task.get("vars") or {})
    assert used <= arguments, used - arguments
    assert play["vars"]["k8s_in_slurm_slurm_user"] == "root"
    token = play["vars"]["k8s_in_slurm_slurm_token"]
    assert "SLURM_JWT" not in token, "a user's token runs the job as that user"
    variable = re.search(r"env', '(\w+)'", token).group(1)
    assert "export %s=" % variable in text, "the page shows how the root token is made"
    assert "env -u SLURM_JWT scontrol token username=root" in text
    setup = re.search(r"```sh\n(.*?)```", text, re.S).group(1)
    for path in play["vars"]["k8s_in_slurm_images"] + [play["vars"]["k8s_in_slurm_bin_dir"]]:
        assert path in setup, "%s is made by the page's setup" % path
