#!/usr/bin/env bash
# Installs the system packages the test suite needs on a Debian machine (bookworm or trixie; run as root).
#   --sandbox-only  only what the executor agent's sandbox needs (bubblewrap, and gVisor's runsc): what
#                   `npm start` runs on a machine that has neither.
# What matters is what the *sandbox* sees: jobs get PATH=/usr/local/bin:/usr/bin:/bin with the host's /usr
# read-only, so a toolchain under ~/.cargo or ~/.pyenv does not count. Each package is checked by the file the
# sandbox would run, and installed only when that file is missing.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
# Where apt's sources and pins go, and which release this is (a test points both at temporary files).
apt_dir=${GATEHOUSE_APT_DIR:-/etc/apt}
os_release=${GATEHOUSE_OS_RELEASE:-/etc/os-release}

sandbox_only=0
case "${1:-}" in
  '') ;;
  --sandbox-only) sandbox_only=1 ;;
  *) echo "install-system-deps: unknown option '$1' (allowed: --sandbox-only)" >&2; exit 2 ;;
esac

# file the sandbox runs → Debian package that provides it
if [ $sandbox_only = 1 ]; then
  declare -A want=([/usr/bin/bwrap]=bubblewrap)
else
  declare -A want=(
    [/usr/bin/bwrap]=bubblewrap
    [/usr/bin/python3]=python3
    [/usr/bin/perl]=perl
    [/usr/bin/cc]=gcc
    [/usr/bin/c++]=g++
    [/usr/bin/ruby]=ruby
    [/usr/bin/php]=php-cli
    [/usr/bin/go]=golang-go
    [/usr/bin/rustc]=rustc
    [/usr/bin/Rscript]=r-base-core
    [/usr/bin/elixir]=elixir
    [/usr/bin/java]=default-jdk-headless
    [/usr/bin/javac]=default-jdk-headless
    [/usr/bin/kotlinc]=kotlin
    [/usr/bin/mcs]=mono-mcs
    [/usr/bin/mono]=mono-runtime
    [/usr/bin/tsc]=node-typescript
    [/usr/bin/sed]=sed
    [/usr/bin/node]=nodejs
    [/usr/bin/git]=git
    [/usr/bin/make]=make
    [/usr/bin/chromium]=chromium
    [/usr/bin/curl]=curl
    [/usr/bin/prlimit]=util-linux
    [/usr/bin/setpriv]=util-linux
    [/usr/bin/timeout]=coreutils
    [/usr/bin/mkfifo]=coreutils
    [/usr/bin/ps]=procps
    [/usr/bin/systemd-analyze]=systemd
  )
fi
need=()
for f in "${!want[@]}"; do [ -e "$f" ] || need+=("${want[$f]}"); done
# apt-get wants each package once
mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u | sed '/^$/d')

updated=0
apt_update() { [ $updated = 1 ] || { echo "install-system-deps: apt-get update"; apt-get update -qq; updated=1; }; }

if [ ${#need[@]} -gt 0 ]; then
  apt_update
  echo "install-system-deps: installing ${need[*]}"
  apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

# The Debian archive this machine's apt already uses (its mirror, proxy or snapshot), so trixie comes from where
# this machine can reach: the first enabled `deb` entry for a Debian release suite (not -updates or -security,
# which are other archives), in the order apt reads the files. Prints nothing when there is none.
debian_release() {
  case "$1" in buster|bullseye|bookworm|trixie|forky|duke|sid|oldoldstable|oldstable|stable|testing|unstable) return 0 ;; esac
  return 1
}
archive_uri_ok() { [[ $1 =~ ^([a-z]+\+)?https?:// ]]; }
# One-line format: deb [options] URI suite component…
one_line_uri() {
  local line i
  local -a w
  while IFS= read -r line || [ -n "$line" ]; do
    read -ra w <<< "${line%%#*}"
    [ "${w[0]:-}" = deb ] || continue
    i=1
    if [[ ${w[1]:-} == '['* ]]; then
      while [ $i -lt ${#w[@]} ] && [[ ${w[$i]} != *']' ]]; do i=$((i + 1)); done
      i=$((i + 1))
    fi
    if archive_uri_ok "${w[$i]:-}" && debian_release "${w[$((i + 1))]:-}"; then printf '%s\n' "${w[$i]%/}"; return 0; fi
  done < "$1"
  return 1
}
# deb822 format: stanzas of Types/URIs/Suites/Enabled fields separated by blank lines.
deb822_uri() {
  local line key types='' uris='' suites='' enabled=yes s u last=''
  local -
  set -f
  while :; do
    if ! IFS= read -r line && [ -z "$line" ]; then last=1; fi
    if [[ -z ${line//[[:space:]]/} ]]; then
      if [[ " $types " == *' deb '* && ${enabled,,} != no ]]; then
        for s in $suites; do
          debian_release "$s" || continue
          for u in $uris; do archive_uri_ok "$u" && { printf '%s\n' "${u%/}"; return 0; }; done
        done
      fi
      [ -z "$last" ] || return 1
      types='' uris='' suites='' enabled=yes
      continue
    fi
    # comments, and continuation lines (a Signed-By key block)
    [[ $line == '#'* || $line == [[:space:]]* ]] && continue
    key=${line%%:*}
    case "${key,,}" in
      types) types=${line#*:} ;;
      uris) uris=${line#*:} ;;
      suites) suites=${line#*:} ;;
      enabled) enabled=${line#*:}; enabled=${enabled//[[:space:]]/} ;;
    esac
  done < "$1"
}
debian_archive_uri() {
  local f
  for f in "$apt_dir/sources.list" "$apt_dir"/sources.list.d/*; do
    [ -f "$f" ] || continue
    case "$f" in
      */gatehouse-trixie.sources) ;;
      */sources.list|*.list) one_line_uri "$f" && return 0 ;;
      *.sources) deb822_uri "$f" && return 0 ;;
    esac
  done
  return 1
}
# Writes $1 with the text $2 unless it already holds exactly that; answers whether it wrote.
write_if_changed() {
  [ -f "$1" ] && [ "$(cat "$1")" = "${2%$'\n'}" ] && return 1
  printf '%s' "$2" > "$1"
}

# gVisor: bookworm's runsc (2022-12-19) fails `ls -l` and `stat` inside the sandbox. Debian trixie's runsc is a
# static binary that installs on bookworm; take exactly that one package from trixie (pin priority 1, so nothing
# else ever upgrades from it) when the installed runsc is missing or older. Trixie and later have it themselves.
# No `| head` anywhere here: under pipefail, head closing the pipe early makes the writer die of SIGPIPE (exit 141).
runsc_date() { runsc --version 2>/dev/null | sed -n 's/^runsc version release-\([0-9]\{8\}\).*/\1/p; s/^runsc version 0\.0~\([0-9]\{8\}\).*/\1/p'; }
have=$(command -v runsc >/dev/null && runsc_date || echo 0)
if [ "${have:-0}" -lt 20240729 ]; then
  if [ "${have:-0}" = 0 ]; then runsc_is='runsc is not installed'; else runsc_is="runsc $have is too old"; fi
  os_id=$( (. "$os_release" 2>/dev/null && echo "${ID:-}") || true)
  codename=$( (. "$os_release" 2>/dev/null && echo "${VERSION_CODENAME:-}") || true)
  if [ "$os_id" != debian ]; then
    echo "install-system-deps: $runsc_is, and this is not Debian (ID=${os_id:-unknown}): install gVisor as https://gvisor.dev/docs/user_guide/install/ says" >&2
    # bubblewrap is a sandbox too; the full run needs gVisor.
    [ $sandbox_only = 1 ] && exit 0
    exit 1
  fi
  case "$codename" in
    buster|bullseye|bookworm)
      echo "install-system-deps: $runsc_is; installing trixie's runsc"
      if uri=$(debian_archive_uri); then
        echo "install-system-deps: taking trixie from $uri (the Debian archive in this machine's apt sources)"
      else
        uri=http://deb.debian.org/debian
        echo "install-system-deps: no Debian archive in the apt sources ($apt_dir/sources.list, $apt_dir/sources.list.d/); taking trixie from $uri"
      fi
      trixie_source="Types: deb
URIs: $uri
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"
      trixie_pins='Package: *
Pin: release n=trixie
Pin-Priority: 1

Package: runsc
Pin: release n=trixie
Pin-Priority: 990
'
      if write_if_changed "$apt_dir/sources.list.d/gatehouse-trixie.sources" "$trixie_source"; then updated=0; fi
      if write_if_changed "$apt_dir/preferences.d/gatehouse-trixie" "$trixie_pins"; then updated=0; fi
      ;;
    *) echo "install-system-deps: $runsc_is; installing runsc" ;;
  esac
  apt_update
  apt-get install -y -qq --no-install-recommends runsc
fi
runsc --version | sed -n 1p
