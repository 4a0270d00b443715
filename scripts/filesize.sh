#!/usr/bin/env bash
# filesize.sh: fails when a library file (a .go file that is not a test, outside benchmarks/)
# is longer than MAX_LINES (800): one concept per file, split before a file grows past it.
set -euo pipefail
cd "$(dirname "$0")/.."
max="${MAX_LINES:-800}"
over=$(git ls-files '*.go' ':!:*_test.go' ':!:benchmarks/*' | xargs wc -l | awk -v max="$max" '$2 != "total" && $1 > max { print "  " $2 ": " $1 " lines" }')
if [ -n "$over" ]; then
	echo "files over $max lines (split them, one concept per file):"
	echo "$over"
	exit 1
fi
