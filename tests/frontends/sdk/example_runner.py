"""Runs one of the Claude Agent SDK's own examples (tests/fixtures/sdk_examples/) unchanged, with
agi as its CLI: every ClaudeAgentOptions made (the example's own, and the one query() and
ClaudeSDKClient make when given none) gets `cli_path` $AGI_SDK_CLI when it names none, which is
all a program does to use agi. The environment (AGI_BASE_URL, AGI_MODEL, ...) reaches agi as the
SDK passes it on. Usage: python example_runner.py EXAMPLE.py [ARGS...]"""

from __future__ import annotations

import os
import runpy
import sys

from claude_agent_sdk import types

made = types.ClaudeAgentOptions.__init__


def with_agi(self: types.ClaudeAgentOptions, *args: object, **kw: object) -> None:
    made(self, *args, **kw)  # type: ignore[arg-type]
    if self.cli_path is None:
        self.cli_path = os.environ["AGI_SDK_CLI"]


types.ClaudeAgentOptions.__init__ = with_agi  # type: ignore[method-assign]

if __name__ == "__main__":
    example = sys.argv[1]
    sys.argv = sys.argv[1:]
    runpy.run_path(example, run_name="__main__")
