"""The Neovim side of agi: the plugin the Python host runs, and the edits it hands to Lua.

`plugin` is imported by the remote-plugin shim and stays light; `engine` (the model call) is
imported on a worker thread; `edit` turns a model's reply into the lines that replace a range.
"""
