#!/bin/sh
# Add $1 as additionalContext for whatever event this hook was called for.
event=$(sed -n 's/.*"hook_event_name": "\([A-Za-z]*\)".*/\1/p')
printf '{"hookSpecificOutput": {"hookEventName": "%s", "additionalContext": "%s"}}\n' "$event" "$1"
