"""`agi --acp` with no model configured (issue 41, docs: acp): it starts and answers
`initialize`, and the editor is told why in protocol terms, not by a closed connection. The
environment is as bare as Zed's snippet with `"env": {}`."""

from __future__ import annotations

import os

import pytest
from acp_client import Agent, Recorder, acp, agi_argv, run

from conftest import AGI

pytestmark = pytest.mark.timeout(120)


def test_no_model_is_the_error_of_session_new_and_the_agent_keeps_serving(env, tmp_path):
    bare = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    bare.update(AGI_HOME=env["AGI_HOME"], AGI_CONFIG=env["AGI_CONFIG"])

    async def go() -> None:
        async with Agent(agi_argv(AGI), bare, tmp_path, Recorder()) as agent:
            init = await agent.conn.initialize(protocol_version=1)
            assert init.agent_info.name == "agi"
            for _ in range(2):  # asked again, the same answer: the agent is still there
                with pytest.raises(acp.RequestError) as failed:
                    await agent.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
                message = failed.value.args[0]
                assert message.startswith("no model configured: pass -m PROVIDER:MODEL")
                assert env["AGI_CONFIG"] in message and "\n" not in message
            listed = await agent.conn.list_sessions()
            assert listed.sessions == []
            assert await agent.close() == 0
            agent.assert_valid()

    run(go())
