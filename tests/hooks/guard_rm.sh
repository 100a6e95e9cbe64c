#!/bin/sh
# PreToolUse guard in the exit-code style: refuse Bash commands starting with rm.
input=$(cat)
case "$input" in
*'"command": "rm '*)
    echo "rm is not allowed here; move files to ./trash instead" >&2
    exit 2
    ;;
esac
exit 0
