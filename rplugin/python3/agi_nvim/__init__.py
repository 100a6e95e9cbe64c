"""agi's remote plugin: the thin shim Neovim's Python host loads (named so it cannot shadow agi).

The host imports this module while Neovim waits for it to start, so it imports pynvim only:
agi.frontends.nvim.plugin (light) is imported at the first call, the engine on a worker thread. The Lua
side defines the commands and calls these functions asynchronously.
"""

import os
import sys

import pynvim

DELIVER = "require('agi')._event(...)"
# agi's repository (rplugin/python3/agi_nvim/ in it): pip installs it as the distribution agi-cli
CHECKOUT = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


@pynvim.plugin
class AgiNvim:
    def __init__(self, nvim):
        self.nvim = nvim
        self.plugin = None
        self.error = None

    def load(self):
        """agi.frontends.nvim.plugin.Plugin, or None with `error` saying why agi cannot be imported."""
        if self.plugin is None and self.error is None:
            try:
                from agi.frontends.nvim.plugin import Plugin
            except ImportError as e:
                self.error = (
                    f"the Python host ({sys.executable}) cannot import agi: {e}. Install it "
                    f"there ({sys.executable} -m pip install -e '{CHECKOUT}[nvim]') or point "
                    "g:python3_host_prog at a Python that has it; see :checkhealth agi"
                )
            else:
                self.plugin = Plugin(self.nvim)
        return self.plugin

    @pynvim.function("AgiHostRequest")
    def request(self, args):
        request = args[0]
        plugin = self.load()
        if plugin is None:
            event = {"type": "error", "message": self.error}
            self.nvim.exec_lua(DELIVER, request["id"], event, async_=True)
        else:
            plugin.request(request)

    @pynvim.function("AgiHostCancel")
    def cancel(self, args):
        plugin = self.load()
        if plugin is not None:
            plugin.cancel(args[0])

    @pynvim.function("AgiHostModels")
    def models(self, args):
        plugin = self.load()
        if plugin is not None:
            plugin.models()

    @pynvim.function("AgiHostSuggest")
    def suggest(self, args):
        plugin = self.load()
        if plugin is None:
            event = {"type": "error", "message": self.error}
            self.nvim.exec_lua(
                "require('agi.suggest')._event(...)", args[0]["id"], event, async_=True
            )
        else:
            plugin.suggest(args[0])

    @pynvim.function("AgiHostSuggestCancel")
    def suggest_cancel(self, args):
        plugin = self.load()
        if plugin is not None:
            plugin.suggest_cancel(*args[:2])

    @pynvim.function("AgiHostNes")
    def nes(self, args):
        plugin = self.load()
        if plugin is None:
            event = {"type": "error", "message": self.error}
            self.nvim.exec_lua("require('agi.nes')._event(...)", args[0]["id"], event, async_=True)
        else:
            plugin.nes(args[0])

    @pynvim.function("AgiHostNesCancel")
    def nes_cancel(self, args):
        plugin = self.load()
        if plugin is not None:
            plugin.nes_cancel(*args[:2])

    @pynvim.function("AgiHostInfo", sync=True)
    def info(self, args):
        plugin = self.load()
        if plugin is None:
            return {"python": sys.executable, "agi_error": self.error}
        return plugin.info()
