"""The permission question under the SDKs' protocol (docs: claude-agent-sdk): `can_use_tool`,
its allow's `updatedInput` and its deny's message handed to the guard through the request."""

from __future__ import annotations

import sys
from typing import Any

from agi.errors import AgiError
from agi.frontends.sdk.channel import Closed


class SdkAsk:
    """The permission question put to the SDK as `can_use_tool` (when asked to, with
    `--permission-prompt-tool stdio`; else nobody is asked and the call is denied)."""

    def __init__(self, server: Any):  # agi.frontends.sdk.main.Server
        self.server = server

    def present(self) -> bool:
        return self.server.args.ask_sdk

    def __call__(self, request: Any) -> str | None:
        if not self.server.args.ask_sdk:
            return None
        body = {"subtype": "can_use_tool", "tool_name": request.tool, "input": request.input}
        body.update(tool_use_id=request.call_id, decision_reason=request.reason)
        body["permission_suggestions"] = [suggestion(r) for r in request.suggestions]
        self.server.state("requires_action")
        try:
            answer = self.server.channel.request(body)
        except Closed:
            return None
        except AgiError as e:
            request.extra["message"] = str(e)
            return "reject_once"
        finally:
            self.server.state("running")
        if answer.get("behavior") == "allow":
            new = answer.get("updatedInput")
            if isinstance(new, dict) and new != request.input:
                request.extra["updated_input"] = new
            return self.remember(request, answer.get("updatedPermissions") or [])
        request.extra["message"] = answer.get("message") or "the SDK's can_use_tool said no"
        if answer.get("interrupt") and self.server.run is not None:
            self.server.run.interrupt()
        return "reject_once"

    def remember(self, request: Any, updates: list[Any]) -> str:
        """An allow's `updatedPermissions`: its allow rules kept for the session (as an
        "always" answer's); any other update is not applied, and stderr says so."""
        rules, other = [], []
        for update in updates:
            if (
                isinstance(update, dict)
                and update.get("type") == "addRules"
                and (update.get("behavior") == "allow")
            ):
                for r in update.get("rules") or []:
                    tool, content = r.get("toolName"), r.get("ruleContent")
                    rules.append(f"{tool}({content})" if content else str(tool))
            else:
                other.append(update)
        if other:
            sys.stderr.write(f"agi: can_use_tool: permission updates not applied: {other}\n")
        if rules:
            request.suggestions = rules
            return "allow_always"
        return "allow_once"


def suggestion(rule: str) -> dict[str, Any]:
    tool, _, rest = rule.partition("(")
    entry: dict[str, Any] = {"toolName": tool}
    if rest:
        entry["ruleContent"] = rest[:-1]
    return {"type": "addRules", "rules": [entry], "behavior": "allow", "destination": "session"}
