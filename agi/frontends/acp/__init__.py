"""`agi --acp`: the Agent Client Protocol agent that editors drive (docs: acp).

`main` is the entry point; `stdio` answers `initialize` while the library loads; `server` the
protocol methods; `session` and `turn` an agi session per ACP session and its turns; `bridge`
the updates and requests to the editor; `tools`, `permissions`, `files`, `replay`, `text` the
tool-call display, the permission question, the editor's files, `session/load` and prompts."""
