#!/usr/bin/env python3
"""PreToolUse in Python: allow the Bash call, with its command replaced by argv[1]."""

import json
import sys

event = json.load(sys.stdin)
new_input = {**event["tool_input"], "command": sys.argv[1]}
answer = {"permissionDecision": "allow", "updatedInput": new_input}
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", **answer}}))
