"""Running a Bridge inventory plugin in unit tests the way ansible-inventory runs it."""

import contextlib
import copy
import importlib
import os

import pytest
import yaml

from ansible.errors import AnsibleError, AnsibleParserError
from ansible.inventory.data import InventoryData
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import fragment_loader, inventory_loader

from ansible_collections.bridge.hpc.plugins.module_utils._errors import ConnectionFailed


@contextlib.contextmanager
def collection_fragments(collection="bridge.hpc"):
    """The doc fragment loader finds this collection's fragments, as it does with a collection finder."""
    get = fragment_loader.get

    def find(name, *args, **kwargs):
        if not name.startswith(collection + "."):
            return get(name, *args, **kwargs)
        module = importlib.import_module("ansible_collections.%s.plugins.doc_fragments.%s" % (
            collection, name[len(collection) + 1:]))
        return type("ModuleDocFragment", (module.ModuleDocFragment,), {"ansible_name": name})

    fragment_loader.get = find
    try:
        yield
    finally:
        del fragment_loader.get


class PluginRunner:
    """Parses inventory files with one plugin; config holds the options every file of a test has."""

    def __init__(self, plugin_module, name, config, filename):
        self.plugin_module = plugin_module
        self.name = name
        self.config = config
        self.filename = filename

    def make_plugin(self, seen_warnings=None):
        """An InventoryModule set up the way the plugin loader does: option definitions from its docs."""
        module = self.plugin_module
        plugin = module.InventoryModule()
        # The loader reads DOCUMENTATION (with the constructed and inventory_cache fragments, and
        # this collection's) into the config manager and names the instance; without a collection
        # finder we do both by hand.
        with collection_fragments():
            inventory_loader._load_config_defs(self.name, module, module.__file__)
        inventory_loader._update_object(obj=plugin, name=self.name, path=module.__file__, resolved=self.name)
        if seen_warnings is not None:
            display = copy.copy(plugin.display)
            display.warning = lambda msg, *args, **kwargs: seen_warnings.append(msg)
            plugin.display = display
        return plugin

    def run(self, tmp_path, config, cache=True, seen_warnings=None, filename=None, inventory=None):
        """Parse an inventory file with this config; returns the InventoryData."""
        body = dict(self.config, plugin=self.name)
        body.update(config)
        path = tmp_path / (filename or self.filename)
        path.write_text(yaml.safe_dump(body))
        inventory = inventory or InventoryData()
        plugin = self.make_plugin(seen_warnings)
        assert plugin.verify_file(str(path))
        plugin.parse(inventory, DataLoader(), str(path), cache=cache)
        # As InventoryManager does: without cache: true there is no cache to write.
        if getattr(plugin, "_cache", None) is not None:
            plugin.update_cache_if_changed()
        return inventory


def hostvars(inventory, host):
    return inventory.get_host(host).get_vars()


def members(inventory, group):
    return sorted(h.name for h in inventory.groups[group].get_hosts())


def cache_config(tmp_path, **extra):
    # Short name: without a collection finder in unit tests, FQCNs of cache plugins do not resolve.
    config = {"cache": True, "cache_plugin": "jsonfile", "cache_connection": str(tmp_path / "cache"), "cache_timeout": 600}
    config.update(extra)
    return config


class InventoryPluginContract:
    """What every Bridge inventory plugin does alike. A test module subclasses this as Test...,
    sets the attributes below and has a fake_client fixture standing in for the plugin's client
    (its instances list, warnings_payload and the read methods)."""

    runner = None          # the module's PluginRunner; its config names url and the secret
    secret = "token"       # the option holding the secret, and the client attribute it reaches
    manager = None         # as in messages: "Ray", "Slurm", "LSF"
    url_var = None         # the hostvar holding the cluster's URL
    host = None            # a host every run of the module's payload makes
    other_url = None       # a URL other than the runner's
    missing_url = None     # the error without url, from "needs " on
    warning = None         # a warning the client might have
    read_call = None       # a client method every read calls ("nodes", "partitions")

    def test_verify_file_rejects_missing_file(self, tmp_path):
        assert not self.runner.make_plugin().verify_file(str(tmp_path / ("absent." + self.runner.filename)))

    def test_secret_may_be_a_template(self, tmp_path, fake_client):
        self.runner.run(tmp_path, {self.secret: "{{ 'abc' ~ 'def' }}"})
        assert getattr(fake_client.instances[-1], self.secret) == "abcdef"

    def test_missing_url_is_a_clear_error(self, tmp_path):
        path = tmp_path / ("nourl." + self.runner.filename)
        path.write_text("plugin: %s\n" % self.runner.name)
        with pytest.raises(AnsibleParserError, match=self.missing_url):
            self.runner.make_plugin().parse(InventoryData(), DataLoader(), str(path))

    def test_client_warnings_are_shown(self, tmp_path, fake_client):
        fake_client.warnings_payload = [self.warning]
        seen = []
        self.runner.run(tmp_path, {}, seen_warnings=seen)
        assert seen == ["%s: %s" % (self.runner.name, self.warning)]

    def test_connection_failure_is_a_parser_error(self, tmp_path, monkeypatch, fake_client):
        url = self.runner.config["url"]

        def refuse(*args, **kwargs):
            raise ConnectionFailed("connection refused", "list", self.read_call, None, self.manager, url)

        monkeypatch.setattr(fake_client, self.read_call, refuse)
        with pytest.raises(AnsibleParserError) as err:
            self.runner.run(tmp_path, {})
        assert str(err.value) == "%s: Failed to list %s on %s at %s: connection refused" % (
            self.runner.name, self.read_call, self.manager, url)
        assert fake_client.instances[-1].closed

    def test_cache_for_another_url_is_not_used(self, tmp_path, fake_client):
        self.runner.run(tmp_path, cache_config(tmp_path))
        inventory = self.runner.run(tmp_path, cache_config(tmp_path, url=self.other_url))
        assert len(fake_client.instances) == 2
        assert hostvars(inventory, self.host)[self.url_var] == self.other_url

    def test_cache_with_another_secret_is_used(self, tmp_path, fake_client):
        # A token or password rotates and is not part of the cache key.
        self.runner.run(tmp_path, cache_config(tmp_path))
        self.runner.run(tmp_path, cache_config(tmp_path, **{self.secret: "rotated"}))
        assert len(fake_client.instances) == 1

    def test_expired_cache_reads_again(self, tmp_path, fake_client):
        self.runner.run(tmp_path, cache_config(tmp_path))
        cache_dir = tmp_path / "cache"
        for name in os.listdir(str(cache_dir)):
            os.utime(str(cache_dir / name), (1, 1))
        self.runner.run(tmp_path, cache_config(tmp_path))
        assert len(fake_client.instances) == 2

    def test_cache_disabled_always_reads(self, tmp_path, fake_client):
        self.runner.run(tmp_path, {})
        self.runner.run(tmp_path, {})
        assert len(fake_client.instances) == 2

    def test_strict_turns_template_errors_into_failures(self, tmp_path):
        config = {"compose": {"broken": "undefined_variable + 1"}, "groups": {"odd": "undefined_variable"}}
        inventory = self.runner.run(tmp_path, config)
        assert "broken" not in hostvars(inventory, self.host)
        assert "odd" not in inventory.groups
        config["strict"] = True
        with pytest.raises(AnsibleError, match="Could not set broken for host "):
            self.runner.run(tmp_path, config)
