#!/bin/sh
# Keep what the hook was given in directory $1: its stdin, working directory and variables.
cat >"$1/stdin.json"
{
    echo "pwd=$(pwd)"
    echo "CLAUDE_PROJECT_DIR=$CLAUDE_PROJECT_DIR"
    echo "AGI_PROJECT_DIR=$AGI_PROJECT_DIR"
    echo "CLAUDE_ENV_FILE=${CLAUDE_ENV_FILE-unset}"
} >"$1/env"
