# shellcheck shell=bash
# The options and the start of the scripts and the shell tests (sourced; plain bash). Sourcing it
# sources common.sh and sets $ringtrain_root, the checkout.
#
# Options, each declared once; the values land in shell variables:
#   ringtrain_opt OPTION VAR DEFAULT HELP [nonempty]
#                                          --OPTION VALUE or --OPTION=VALUE sets VAR (DEFAULT
#                                          before); with nonempty, an empty VALUE is refused
#   ringtrain_list OPTION VAR HELP         each --OPTION VALUE adds VALUE to the array VAR (empty
#                                          before)
#   ringtrain_flag OPTION VAR HELP         --OPTION sets VAR to 1 (0 before)
#   ringtrain_rest VAR HELP [MODE]         the array VAR (empty before) takes what follows `--`,
#                                          and by MODE also: command, the first argument not
#                                          starting with `-` and all after it (a command line);
#                                          words, every such argument wherever it stands; any,
#                                          every argument that is no option declared here (to be
#                                          passed on to another program)
#   ringtrain_parse_args "$@"              sets the variables. --help (-h) prints the script's header
#                                          comment (less shellcheck directives) and the options with
#                                          their defaults, exit 0; an unknown option, a missing
#                                          value, a flag given a value or an empty value where
#                                          nonempty: one line naming it, exit 2
# The start:
#   ringtrain_on_exit COMMAND              runs COMMAND at exit, the last one registered first
#   ringtrain_temp_dir VAR                 VAR = a new temporary folder, removed at exit
#   ringtrain_test_start [checks]          a shell test's start: set -uo pipefail (a test counts its
#                                          failures rather than stopping at the first), $work a
#                                          temporary folder removed at exit; with `checks`, the
#                                          ok/fail/check of tests/support/checks.sh

ringtrain_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=common.sh
source "$ringtrain_root/scripts/lib/common.sh"

_ringtrain_kinds=() _ringtrain_options=() _ringtrain_vars=() _ringtrain_defaults=() _ringtrain_helps=()
_ringtrain_rest="" _ringtrain_rest_help="" _ringtrain_rest_mode="" _ringtrain_exit=""

# _ringtrain_declare KIND OPTION VAR DEFAULT HELP
_ringtrain_declare() {
  _ringtrain_kinds+=("$1") _ringtrain_options+=("$2") _ringtrain_vars+=("$3")
  _ringtrain_defaults+=("$4") _ringtrain_helps+=("$5")
  printf -v "$3" '%s' "$4"
}
ringtrain_opt() {
  local _rt_kind=value
  [ "${5:-}" != nonempty ] || _rt_kind=nonempty
  _ringtrain_declare "$_rt_kind" "$1" "$2" "$3" "$4"
}
ringtrain_list() {
  _ringtrain_declare list "$1" "$2" "" "$3"
  eval "$2=()"
}
ringtrain_flag() { _ringtrain_declare flag "$1" "$2" 0 "$3"; }
ringtrain_rest() {
  _ringtrain_rest="$1" _ringtrain_rest_help="$2" _ringtrain_rest_mode="${3:-}"
  eval "$1=()"
}

_ringtrain_bad() {
  echo "${0##*/}: $* (see --help)" >&2
  exit 2
}

_ringtrain_help() {
  local _rt_i _rt_left _rt_default _rt_rest="-- ..." _rt_usage="[-- ...]"
  case "$_ringtrain_rest_mode" in
    command) _rt_rest="[--] ..." _rt_usage="[--] ..." ;;
    words | any) _rt_rest="..." _rt_usage="[...]" ;;
  esac
  echo "usage: ${0##*/} [OPTIONS]${_ringtrain_rest:+ $_rt_usage}"
  sed -n '2,/^[^#]/{/^# shellcheck /d;s/^# \{0,1\}//p}' "$0"
  echo "options:"
  for _rt_i in "${!_ringtrain_options[@]}"; do
    _rt_left="${_ringtrain_options[_rt_i]}" _rt_default=""
    case "${_ringtrain_kinds[_rt_i]}" in
      value | nonempty)
        _rt_left+=" ${_ringtrain_vars[_rt_i]^^}"
        _rt_default="${_ringtrain_defaults[_rt_i]:+ (default: ${_ringtrain_defaults[_rt_i]})}" ;;
      list) _rt_left+=" ${_ringtrain_vars[_rt_i]^^}" _rt_default=" (repeatable)" ;;
    esac
    printf '  %-26s %s%s\n' "$_rt_left" "${_ringtrain_helps[_rt_i]}" "$_rt_default"
  done
  [ -z "$_ringtrain_rest" ] || printf '  %-26s %s\n' "$_rt_rest" "$_ringtrain_rest_help"
}

ringtrain_parse_args() {
  local _rt_arg _rt_name _rt_value _rt_i _rt_found
  while [ $# -gt 0 ]; do
    _rt_arg="$1"
    shift
    case "$_rt_arg" in
      -h | --help) _ringtrain_help; exit 0 ;;
      --)
        [ -n "$_ringtrain_rest" ] || _ringtrain_bad "unexpected '--'"
        eval "$_ringtrain_rest+=(\"\$@\")"
        return 0 ;;
    esac
    _rt_name="${_rt_arg%%=*}" _rt_found=""
    for _rt_i in "${!_ringtrain_options[@]}"; do
      [ "${_ringtrain_options[_rt_i]}" != "$_rt_name" ] || _rt_found="$_rt_i"
    done
    if [ -z "$_rt_found" ]; then
      case "$_ringtrain_rest_mode:$_rt_arg" in
        any:* | words:[!-]*) eval "$_ringtrain_rest+=(\"\$_rt_arg\")"; continue ;;
        command:[!-]*) eval "$_ringtrain_rest+=(\"\$_rt_arg\" \"\$@\")"; return 0 ;;
      esac
      _ringtrain_bad "unknown option '$_rt_arg'"
    fi
    if [ "${_ringtrain_kinds[_rt_found]}" = flag ]; then
      [ "$_rt_name" = "$_rt_arg" ] || _ringtrain_bad "$_rt_name takes no value"
      _rt_value=1
    elif [ "$_rt_name" != "$_rt_arg" ]; then
      _rt_value="${_rt_arg#*=}"
    else
      [ $# -gt 0 ] || _ringtrain_bad "$_rt_name needs a value"
      _rt_value="$1"
      shift
    fi
    case "${_ringtrain_kinds[_rt_found]}" in
      list) eval "${_ringtrain_vars[_rt_found]}+=(\"\$_rt_value\")" ;;
      # nonempty: checked, then set as any value
      nonempty) [ -n "$_rt_value" ] || _ringtrain_bad "$_rt_name needs a value, not an empty one" ;&
      *) printf -v "${_ringtrain_vars[_rt_found]}" '%s' "$_rt_value" ;;
    esac
  done
}

ringtrain_on_exit() {
  _ringtrain_exit="$1${_ringtrain_exit:+; $_ringtrain_exit}"
  # shellcheck disable=SC2064  # the commands are fixed now
  trap "$_ringtrain_exit" EXIT
}

ringtrain_temp_dir() {
  local _rt_dir
  _rt_dir="$(mktemp -d)"
  printf -v "$1" '%s' "$_rt_dir"
  ringtrain_on_exit "rm -rf '$_rt_dir'"
}

ringtrain_test_start() {
  set -uo pipefail
  ringtrain_temp_dir work
  if [ "${1:-}" = checks ]; then
    # shellcheck source=../../tests/support/checks.sh
    source "$ringtrain_root/tests/support/checks.sh"
  fi
}
