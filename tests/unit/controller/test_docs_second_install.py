"""docs/controller.md's "A second controller" overlay, built by kustomize as the page shows it:
every namespaced object in the second namespace, every cluster-wide one but the CRDs renamed, the
bindings' subjects its own ServiceAccount, and its controller acting only on labelled BridgeJobs."""

import os
import re
import shutil
import subprocess

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CLUSTER_KINDS = ("Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
                 "ValidatingAdmissionPolicyBinding")


@pytest.mark.skipif(not shutil.which("kubectl"), reason="kubectl (kustomize) is not installed")
def test_the_documented_second_install_keeps_apart_from_the_first(tmp_path):
    with open(os.path.join(REPO, "docs", "controller.md")) as handle:
        text = handle.read()
    section = text[text.index("### A second controller"):text.index("\n## ", text.index("### A second controller"))]
    overlay = re.search(r"```yaml\n# bridge-two/kustomization.yaml\n(.*?)```", section, re.S).group(1)
    os.symlink(os.path.join(REPO, "deploy"), str(tmp_path / "deploy"))
    (tmp_path / "bridge-two").mkdir()
    (tmp_path / "bridge-two" / "kustomization.yaml").write_text(overlay.replace("<path>/deploy", "../deploy"))
    built = subprocess.run(["kubectl", "kustomize", "--load-restrictor", "LoadRestrictionsNone", str(tmp_path / "bridge-two")],
                           capture_output=True, text=True, timeout=120, check=False)
    assert built.returncode == 0, built.stderr
    objects = list(yaml.safe_load_all(built.stdout))
    for obj in objects:
        name, kind = obj["metadata"]["name"], obj["kind"]
        if kind == "CustomResourceDefinition":
            assert not name.endswith("-two")
        elif kind == "Namespace":
            assert name == "bridge-two"
        elif kind in CLUSTER_KINDS:
            assert name.endswith("-two"), (kind, name)
        else:
            assert obj["metadata"]["namespace"] == "bridge-two", (kind, name)
        for subject in obj.get("subjects") or []:
            assert (subject["name"], subject["namespace"]) == ("bridge-controller-two", "bridge-two")
    deployment = next(obj for obj in objects if obj["kind"] == "Deployment")
    assert "--selector=bridge.dev/controller=two" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--selector=!bridge.dev/controller" in section, "the first install gets the opposite selector"
