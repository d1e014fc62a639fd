#!/usr/bin/env bash
# Installs the system packages the test suite needs on a Debian bookworm machine (run as root).
# What matters is what the *sandbox* sees: jobs get PATH=/usr/local/bin:/usr/bin:/bin with the host's /usr
# read-only, so a toolchain under ~/.cargo or ~/.pyenv does not count. Each package is checked by the file the
# sandbox would run, and installed only when that file is missing.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

# file the sandbox runs → Debian package that provides it
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
  [/usr/bin/prlimit]=util-linux
  [/usr/bin/setpriv]=util-linux
  [/usr/bin/timeout]=coreutils
  [/usr/bin/mkfifo]=coreutils
  [/usr/bin/ps]=procps
  [/usr/bin/systemd-analyze]=systemd
)
need=()
for f in "${!want[@]}"; do [ -e "$f" ] || need+=("${want[$f]}"); done
# apt-get wants each package once
mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u | sed '/^$/d')

updated=0
apt_update() { [ $updated = 1 ] || { apt-get update -qq; updated=1; }; }

if [ ${#need[@]} -gt 0 ]; then
  echo "install-system-deps: installing ${need[*]}"
  apt_update
  apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

# gVisor: bookworm's runsc (2022-12-19) fails `ls -l` and `stat` inside the sandbox. Debian trixie's runsc is a
# static binary that installs on bookworm; take exactly that one package from trixie (pin priority 1, so nothing
# else ever upgrades from it) when the installed runsc is missing or older.
# No `| head` anywhere here: under pipefail, head closing the pipe early makes the writer die of SIGPIPE (exit 141).
runsc_date() { runsc --version 2>/dev/null | sed -n 's/^runsc version release-\([0-9]\{8\}\).*/\1/p; s/^runsc version 0\.0~\([0-9]\{8\}\).*/\1/p'; }
have=$(command -v runsc >/dev/null && runsc_date || echo 0)
if [ "${have:-0}" -lt 20240729 ]; then
  echo "install-system-deps: runsc ${have:-none} is too old; installing trixie's runsc"
  if [ ! -e /etc/apt/sources.list.d/gatehouse-trixie.sources ]; then
    cat > /etc/apt/sources.list.d/gatehouse-trixie.sources <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    cat > /etc/apt/preferences.d/gatehouse-trixie <<'EOF'
Package: *
Pin: release n=trixie
Pin-Priority: 1

Package: runsc
Pin: release n=trixie
Pin-Priority: 990
EOF
    updated=0
  fi
  apt_update
  apt-get install -y -qq --no-install-recommends runsc
fi
runsc --version | sed -n 1p
