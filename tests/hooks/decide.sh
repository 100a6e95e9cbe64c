#!/bin/sh
# PreToolUse in the JSON style: answer with permissionDecision $1 and reason $2.
cat >/dev/null
printf '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "%s", "permissionDecisionReason": "%s"}}\n' "$1" "$2"
