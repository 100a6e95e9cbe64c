#!/bin/sh
# The simplest hook: print $2 on stdout and $3 on stderr, then exit with status $1.
cat >/dev/null
if [ -n "$2" ]; then printf '%s\n' "$2"; fi
if [ -n "$3" ]; then printf '%s\n' "$3" >&2; fi
exit "$1"
