"""Run a module's main() in-process and catch its exit_json or fail_json as an exception."""

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args


class Exit(Exception):
    def __init__(self, kwargs):
        super(Exit, self).__init__(kwargs)
        self.result = kwargs


class Fail(Exit):
    pass


def capture_exits(monkeypatch):
    """Make exit_json and fail_json raise Exit and Fail (the conftest's `capture` fixture)."""
    def exit_json(self, **kwargs):
        raise Exit(kwargs)

    def fail_json(self, **kwargs):
        raise Fail(kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)


def run(module, args, check_mode=False, diff=False):
    """The module's Exit (or Fail, a subclass) for these arguments; needs the capture fixture."""
    args = dict(args)
    if check_mode:
        args["_ansible_check_mode"] = True
    if diff:
        args["_ansible_diff"] = True
    with patch_module_args(args):
        with pytest.raises(Exit) as outcome:
            module.main()
    return outcome.value
