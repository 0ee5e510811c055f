# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin base that reads a job's script_file on the controller. Internal to this collection."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase


class ScriptFileAction(ActionBase):
    """Turns `script_file` (a path on the controller, searched like `files/`) into `script`.

    Job modules run wherever the task runs; the script a user points at lives beside the playbook,
    so it is read here, byte-exact, and sent on as the inline `script` option.
    """

    def run(self, tmp=None, task_vars=None):
        result = super(ScriptFileAction, self).run(tmp, task_vars)
        module_args = dict(self._task.args)
        script_file = module_args.pop("script_file", None)
        if script_file is not None:
            if module_args.get("script") is not None:
                result.update(failed=True, msg="parameters are mutually exclusive: script|script_file")
                return result
            try:
                path = self._find_needle("files", script_file)
                with open(path, "rb") as handle:
                    content = handle.read()
                module_args["script"] = to_text(content, errors="strict")
            except (AnsibleError, OSError) as exc:
                result.update(failed=True, msg="script_file: cannot read '%s': %s" % (script_file, to_text(exc)))
                return result
            except UnicodeDecodeError:
                result.update(failed=True, msg="script_file: '%s' is not UTF-8 text" % script_file)
                return result
        result.update(self._execute_module(
            module_name=self._task.resolved_action or self._task.action,
            module_args=module_args,
            task_vars=task_vars,
        ))
        return result
