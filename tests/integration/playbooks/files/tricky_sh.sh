#!/bin/sh
# Bytes that break naive quoting: 'single' "double" `backtick` $HOME ${PATH} \backslash \\ \n
# Unicode: ünïcødé ✓ 日本語 — and text that looks like Jinja but is not templated: {{ not_a_var }} {% raw %}
set -eu
cat "$0"
cat <<'END_OF_TEXT'
literal $HOME `date` \t "quoted" 'single'
END_OF_TEXT
printf '%s in %s\n' "done: $GREETING" "$(pwd)"
