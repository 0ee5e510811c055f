# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sphinx configuration of the collection's docsite, built by tools/docs.sh (`make docs`).

Started from what `antsibull-docs sphinx-init --use-current --squash-hierarchy bridge.hpc`
(antsibull-docs 2.28.0) writes, without intersphinx (see _ansible_docsite_uri) and without the
settings that Sphinx and the theme no longer read.
"""

import re

from docutils import nodes

project = "bridge.hpc"
copyright = "Bridge developers"  # pylint: disable=redefined-builtin  # Sphinx's name for it
html_short_title = "bridge.hpc"

extensions = ["sphinx_antsibull_ext"]

pygments_style = "ansible"
highlight_language = "YAML+Jinja"

html_theme = "sphinx_ansible_theme"
html_show_sphinx = False
html_use_index = False
html_copy_source = False

default_role = "any"
nitpicky = True

# The pages antsibull-docs writes link to Ansible's own docsite: the return values common to all
# modules, action plugins, the inventory cache settings and their environment variables, and the
# plugins of other collections (ansible.builtin, ansible.posix). sphinx-init resolves them with
# intersphinx from docs.ansible.com, which cannot be reached here, so they become links to the same
# pages by name. Every other unresolved reference, in particular one into this collection, stays a
# warning and fails the build (-W). References to other collections' plugins are checked to exist
# by `antsibull-docs lint-collection-docs --validate-collection-refs all` before this build.
ANSIBLE_DOCSITE = "https://docs.ansible.com/projects/ansible/devel/"
ANSIBLE_LABELS = {
    "action_plugins": "plugins/action.html",
    "ansible_configuration_settings": "reference_appendices/config.html",
    "common_return_values": "reference_appendices/common_return_values.html",
}
OTHER_COLLECTION_PLUGIN = re.compile(r"ansible_collections\.(\w+)\.(\w+)\.(\w+)")


def _ansible_docsite_uri(reftype, target):
    if reftype == "envvar" and target.startswith("ANSIBLE_"):
        return "reference_appendices/config.html#envvar-" + target
    if reftype != "ref":
        return None
    if target in ANSIBLE_LABELS:
        return ANSIBLE_LABELS[target]
    plugin = OTHER_COLLECTION_PLUGIN.fullmatch(target)
    if plugin and plugin.group(1, 2) != tuple(project.split(".")):
        return "collections/%s/%s/%s.html" % plugin.group(1, 2, 3)
    return None


def _link_to_ansible_docsite(app, env, node, contnode):
    path = _ansible_docsite_uri(node.get("reftype"), node.get("reftarget", ""))
    if path is None:
        return None
    return nodes.reference("", "", contnode, internal=False, refuri=ANSIBLE_DOCSITE + path)


def setup(app):
    app.connect("missing-reference", _link_to_ansible_docsite)
