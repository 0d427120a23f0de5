#!/usr/bin/env bash
# The manual pages the build made (docs/man/meson.build) render with man(1)
# without a single warning, as lintian renders them, and list every flag that
# the programs' --help lists (dlfs-ctl: every command's --help too) and every
# config key that `dlfsd --config-keys` lists. No root, no mount.
# Environment (set by meson): DLFSD, DLFS_CTL, DLFS_SLURM_LAUNCH, MAN_PAGES.
set -euo pipefail
: "${DLFSD:?}" "${DLFS_CTL:?}" "${DLFS_SLURM_LAUNCH:?}" "${MAN_PAGES:?}"
command -v man >/dev/null || { echo "SKIP: man (man-db) is not installed"; exit 77; }

WORK=$(mktemp -d /tmp/dlfs-man-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
failed=0
fail() { echo "FAIL: $*" >&2; failed=1; }

# render PAGE: the page as text in $WORK/<page>.txt; any warning fails.
render() {
  local page=$1 out=$WORK/$(basename "$1").txt err=$WORK/$(basename "$1").err
  [ -s "$page" ] || { fail "$page is missing or empty"; return; }
  LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l "$page" >"$out" 2>"$err" || fail "man -l $page failed"
  if [ -s "$err" ]; then fail "$(basename "$page") renders with warnings:"; sed 's/^/  /' "$err" >&2; fi
  [ -s "$out" ] || fail "$(basename "$page") renders to nothing"
}

# flags_of: the option names (-x, --long-name) a --help text on stdin lists.
flags_of() { grep -oE '(^|[[:space:],[])--?[A-Za-z][A-Za-z0-9-]*' | sed -E 's/^[[:space:],[]+//' | sort -u; }

# expect_words PAGE_TEXT WHAT WORD...: every WORD is a whole word of the
# rendered page (a flag, a key, a command: letters, digits, '_' and '-').
expect_words() {
  local text=$1 what=$2 missing
  grep -oE -- '-{0,2}[A-Za-z0-9_][A-Za-z0-9_-]*' "$text" | sort -u >"$text.words"
  shift 2
  missing=$(printf '%s\n' "$@" | sort -u | comm -23 - "$text.words")
  [ -z "$missing" ] || fail "$(basename "$text" .txt) does not list the $what: $(echo $missing)"
}

# subcommands_of ARGS...: the commands `dlfs-ctl ARGS... --help` lists under "Subcommands:".
subcommands_of() {
  "$DLFS_CTL" "$@" --help | awk '/^Subcommands:/ {on = 1; next} on && /^  [a-z]/ {print $1} on && /^$/ {on = 0}'
}

for page in dlfsd.8 dlfs.toml.5 dlfs-ctl.8 dlfs-slurm-launch.1; do render "$MAN_PAGES/$page"; done

# dlfsd(8): every flag of --help.
mapfile -t flags < <("$DLFSD" --help | flags_of)
[ "${#flags[@]}" -gt 40 ] || fail "dlfsd --help lists only ${#flags[@]} flags"
expect_words "$WORK/dlfsd.8.txt" "dlfsd flag" "${flags[@]}"

# dlfs.toml(5): every section and key of the table docs/configuration.md ends with.
mapfile -t keys < <("$DLFSD" --config-keys | awk -F'|' 'NR > 2 {gsub(/[` ]/, "", $3); print $3}' | sort -u)
[ "${#keys[@]}" -gt 40 ] || fail "dlfsd --config-keys lists only ${#keys[@]} keys"
expect_words "$WORK/dlfs.toml.5.txt" "config key" "${keys[@]}"
for section in '[daemon]' '[cache]' '[cluster]' '[[dataset]]'; do
  grep -qF -- "$section" "$WORK/dlfs.toml.5.txt" || fail "dlfs.toml.5 has no section $section"
done

# dlfs-ctl(8): the global flags and, command by command (depth first), each
# command's name and flags.
"$DLFS_CTL" --help | flags_of >"$WORK/ctl-flags"
commands=()
walk() {
  local sub
  for sub in $(subcommands_of "$@"); do
    commands+=("$sub")
    "$DLFS_CTL" "$@" "$sub" --help | flags_of >>"$WORK/ctl-flags"
    walk "$@" "$sub"
  done
}
walk
[ "${#commands[@]}" -gt 10 ] || fail "dlfs-ctl lists only ${#commands[@]} commands"
mapfile -t flags < <(sort -u "$WORK/ctl-flags")
expect_words "$WORK/dlfs-ctl.8.txt" "dlfs-ctl flag" "${flags[@]}"
expect_words "$WORK/dlfs-ctl.8.txt" "dlfs-ctl command" "${commands[@]}"

# dlfs-slurm-launch(1): every flag of the script's --help.
mapfile -t flags < <("$DLFS_SLURM_LAUNCH" --help | flags_of)
expect_words "$WORK/dlfs-slurm-launch.1.txt" "dlfs-slurm-launch flag" "${flags[@]}"

# The hidden flags that make the pages stay out of them and of --help.
for page in dlfsd.8 dlfs-ctl.8; do
  ! grep -q -- '--man-page' "$WORK/$page.txt" || fail "$page lists the hidden --man-page"
done

[ "$failed" -eq 0 ] || exit 1
echo "ok: 4 pages render without warnings and list every flag, command and key"
