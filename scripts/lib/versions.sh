# shellcheck shell=bash
# tf_pinned NAME: the version versions.yml (the collection's one list of pinned component versions) gives NAME.
tf_versions_file=${TF_VERSIONS_FILE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/versions.yml}

tf_pinned() {
  local value
  value=$(sed -n "s/^$1: *\"\([^\"]*\)\".*/\1/p" "$tf_versions_file")
  if [[ -z $value ]]; then
    printf '%s pins no version of %s\n' "$tf_versions_file" "$1" >&2
    return 1
  fi
  printf '%s\n' "$value"
}
