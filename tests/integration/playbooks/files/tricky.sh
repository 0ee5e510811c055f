#!/usr/bin/env bash
# Bytes that break naive quoting: 'single' "double" `backtick` $HOME ${PATH} \backslash \\ \n
# Unicode: ünïcødé ✓ 日本語 — and text that looks like Jinja but is not templated: {{ not_a_var }} {% raw %}
set -eu
cp "$0" "$SCRIPT_COPY"
cat > "$SCRIPT_COPY.heredoc" <<'END_OF_TEXT'
literal $HOME `date` \t "quoted" 'single'
END_OF_TEXT
printf '%s\n' "done: $GREETING"
