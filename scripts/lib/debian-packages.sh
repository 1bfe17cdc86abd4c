# shellcheck shell=bash
# Debian packages without touching this machine's apt state: a private apt (lists, cache, dpkg status) under
# $apt_dir, this machine's sources (Debian bookworm). Sourced by scripts/build-node-images and build-host-image.
apt_dir=${apt_dir:-${TF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tokenfactory}/debian-packages}

# Download into DIR the packages and every dependency that the dpkg status file STATUS does not list as installed
# (an empty STATUS: the full closure, libc6 included).
debian_download() { # dir status packages...
  local dir=$1 status=$2 state=$apt_dir/state
  shift 2
  mkdir -p "$state/lists/partial" "$dir/partial"
  exec 8>"$apt_dir/.lock"
  flock 8
  local apt=(-o "Dir::State=$state" -o "Dir::State::status=$status" -o "Dir::Cache=$apt_dir/cache"
    -o "Dir::Cache::archives=$dir" -o Debug::NoLocking=1 -o APT::Sandbox::User=root
    -o APT::Install-Recommends=false -o APT::Install-Suggests=false)
  # Package lists at most a day old.
  if [ -z "$(find "$state/lists" -maxdepth 1 -name '*_Packages*' -mtime -1 2>/dev/null)" ]; then
    apt-get "${apt[@]}" -qq update
  fi
  apt-get "${apt[@]}" -qq -y --download-only install "$@" >/dev/null
  rm -rf "$dir/partial" "$dir/lock"
  exec 8>&-
}

# Unpack packages and their dependencies into a rootfs directory (no maintainer scripts run); their
# name=version list goes to DIR.packages.
debian_rootfs() { # dir packages...
  local dir=$1 debs deb
  shift
  debs=$(mktemp -d)
  : >"$debs.status"
  debian_download "$debs" "$debs.status" "$@"
  for deb in "$debs"/*.deb; do
    dpkg-deb -x "$deb" "$dir"
    dpkg-deb -f "$deb" Package Version | paste -sd= >>"$dir.packages"
  done
  rm -rf "$debs" "$debs.status" "$dir/usr/share/doc" "$dir/usr/share/man" "$dir/usr/share/info" "$dir/usr/share/locale"
}
