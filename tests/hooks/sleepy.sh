#!/bin/sh
# Sleep $1 seconds in a child process whose pid goes to file $2 (parallelism, timeouts).
cat >/dev/null
sleep "$1" &
if [ -n "$2" ]; then echo $! >"$2"; fi
wait
echo '{"systemMessage": "slept"}'
