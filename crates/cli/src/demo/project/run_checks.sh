#!/bin/sh
# Run the checks with python3; on a machine without it, show the line under test instead.
if command -v python3 >/dev/null 2>&1; then
    exec python3 -B test_stats.py
fi
echo "python3 is not installed here; the line under test is:"
grep -n "return sum" stats.py
