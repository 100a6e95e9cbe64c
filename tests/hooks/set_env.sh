#!/bin/sh
# SessionStart: keep variables for later Bash calls in CLAUDE_ENV_FILE, and say hello.
cat >/dev/null
echo 'export AGI_TEST_GREETING="hello world"' >>"$CLAUDE_ENV_FILE"
echo 'export PATH="/opt/agi-test/bin:$PATH"' >>"$CLAUDE_ENV_FILE"
echo 'AGI_TEST_PLAIN=plain' >>"$CLAUDE_ENV_FILE"
echo "the build uses make"
