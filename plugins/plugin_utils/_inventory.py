# -*- coding: utf-8 -*-
# Copyright: Bridge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the Bridge inventory plugins share. Internal to this collection."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.errors import AnsibleParserError
from ansible.module_utils.common.text.converters import to_native
from ansible.utils.unsafe_proxy import wrap_var

from ansible_collections.bridge.hpc.plugins.module_utils._errors import BridgeError
from ansible_collections.bridge.hpc.plugins.module_utils._transport import HAS_HTTPX

try:
    # ansible-core 2.19+ templates only strings marked trusted; older releases trust every string.
    from ansible.template import trust_as_template
except ImportError:
    def trust_as_template(value):
        return value


def without_native(items):
    return [dict((k, v) for k, v in item.items() if k != "native") for item in items]


class InventorySource(object):
    """Reading a manager or the cache, and adding hosts, for a plugin that also derives from
    BaseInventoryPlugin, Constructable and Cacheable (listed after this class).

    The cache holds the payload a plugin's _fetch(source) returns, never hosts: _populate(payload)
    makes hosts and groups again on every run, so the groups, compose and the plugin's own options
    of this run apply. The payload carries "format" (the plugin's PAYLOAD_FORMAT) and "source"
    (what _source() returned); an entry of another format or source is read again.

    _fetch reads the manager through _read(source, read), which needs the plugin's _client(source).
    """

    NAME = None            # "bridge.hpc.<plugin>"
    MANAGER = None         # as in error messages: "Slurm", "Ray"
    FILE_SUFFIXES = ()     # ("<plugin>.yml", "<plugin>.yaml")
    SOURCE_OPTIONS = ()    # options the payload depends on; never the token
    URL_VAR = None         # the hostvar naming the cluster a host comes from
    HOSTS = "hosts"        # what the plugin's hosts are, for messages: "partitions", "nodes"
    URL_NAME = None        # what url is, for messages: "the slurmrestd URL"
    URL_ENV = None         # the environment variable url falls back to; None: url is optional
    PAYLOAD_FORMAT = 1     # bump when the payload changes shape

    def verify_file(self, path):
        if not super(InventorySource, self).verify_file(path):
            return False
        return path.endswith(self.FILE_SUFFIXES)

    def parse(self, inventory, loader, path, cache=True):
        super(InventorySource, self).parse(inventory, loader, path, cache)
        self._read_config_data(path)
        source = self._source()
        use_cache = self.get_option("cache")
        cache_key = self.get_cache_key(path)
        payload = self._cached_payload(cache_key, source) if use_cache and cache else None
        if payload is None:
            payload = self._fetch(source)
            if use_cache:
                self._cache[cache_key] = payload
        self._populate(payload)

    def _read(self, source, read):
        """read(client) with a client for source; the client's warnings shown, a BridgeError made a
        parser error, the client closed."""
        if not HAS_HTTPX:
            raise AnsibleParserError("%s needs the Python library httpx on the controller "
                                     "(pip install httpx)" % self.NAME)
        if self.URL_ENV and not source["url"]:
            raise AnsibleParserError("%s needs %s: set url in the inventory file or the environment "
                                     "variable %s" % (self.NAME, self.URL_NAME, self.URL_ENV))
        client = None
        try:
            client = self._client(source)
            data = read(client)
            for warning in client.warnings:
                self.display.warning("%s: %s" % (self.NAME, warning))
        except BridgeError as exc:
            # The client scrubs the token from every message it builds.
            raise AnsibleParserError("%s: %s" % (self.NAME, to_native(exc)))
        finally:
            if client is not None:
                client.close()
        return data

    def _connection_option(self, source):
        """get(name) of a connection option for Backend.from_options: the source's values first."""
        return lambda name: source[name] if name in source else self._option(name)

    def _backend_options(self, backend, source):
        """_connection_option(source) for `backend`, whose EXCLUSIVE options (Slurm's token and
        token_file) take their environment variables only when none of their group is set in the
        source file: an option set there wins over another's variable (Backend.with_environment)."""
        exclusive = backend.exclusive_names()
        connection = self._connection_option(source)

        def get(name):
            if name in exclusive and name not in source and self._from_environment(name):
                return None
            return connection(name)
        return backend.with_environment(get, os.environ)

    def _from_environment(self, name):
        """Whether option `name` got its value from an environment variable (its `env:` entry)."""
        origin_of = getattr(self, "get_option_and_origin", None)
        if origin_of is None:
            return False
        try:
            origin = origin_of(name)[1]
        except KeyError:
            return False
        return str(origin or "").startswith("env:")

    def _option(self, name):
        value = self.get_option(name)
        if isinstance(value, str) and self.templar.is_template(value):
            value = self.templar.template(value)
        return value

    def _source(self):
        """What the cached payload depends on; the token is left out on purpose (it rotates).

        Plain str() copies: ansible-core 2.19 config values carry tags (origin, trust) that would
        otherwise be written into the cache along with them.
        """
        values = dict((name, self._option(name)) for name in self.SOURCE_OPTIONS)
        return dict((key, None if value is None else str(value)) for key, value in values.items())

    def _cached_payload(self, cache_key, source):
        try:
            payload = self._cache[cache_key]
        except KeyError:
            return None
        if not isinstance(payload, dict) or payload.get("format") != self.PAYLOAD_FORMAT:
            return None
        if payload.get("source") != source:
            self.display.vvv("%s: the cached inventory is for another %s; reading %s again" % (
                self.NAME, "/".join(self.SOURCE_OPTIONS), self.MANAGER))
            return None
        return payload

    def _add_host(self, host, variables):
        """Add a host with variables read from the manager: the one place they are marked unsafe."""
        existing = self.inventory.hosts.get(host)
        if existing is not None:
            url = existing.vars.get(self.URL_VAR)
            if url is not None and url != variables[self.URL_VAR]:
                raise AnsibleParserError(
                    "%s: host '%s' already comes from the %s cluster at %s; set host_prefix so that %s "
                    "of different clusters get different names" % (self.NAME, host, self.MANAGER, url, self.HOSTS))
        self.inventory.add_host(host)
        for key, value in variables.items():
            self.inventory.set_variable(host, key, wrap_var(value))

    def _set_local_connection(self, host):
        """Run the host's tasks on the controller, with the Python that runs Ansible (it has httpx)."""
        self.inventory.set_variable(host, "ansible_connection", "local")
        self.inventory.set_variable(host, "ansible_python_interpreter", trust_as_template("{{ ansible_playbook_python }}"))

    def _add_to_group(self, group, host):
        group = self.inventory.add_group(self._sanitize_group_name(group))
        self.inventory.add_child(group, host)

    def _construct(self, host):
        strict = self.get_option("strict")
        variables = self.inventory.get_host(host).get_vars()
        self._set_composite_vars(self.get_option("compose"), variables, host, strict=strict)
        self._add_host_to_composed_groups(self.get_option("groups"), variables, host, strict=strict)
        self._add_host_to_keyed_groups(self.get_option("keyed_groups"), variables, host, strict=strict)
