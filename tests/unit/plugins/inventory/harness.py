"""Running a Bridge inventory plugin in unit tests the way ansible-inventory runs it."""

import copy

import yaml

from ansible.inventory.data import InventoryData
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import inventory_loader


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
        # The loader reads DOCUMENTATION (with the constructed and inventory_cache fragments) into the
        # config manager and names the instance; without a collection finder we do both by hand.
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
