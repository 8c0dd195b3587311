#!/usr/bin/env bash
# The README's commands on a fresh machine: a minimal Debian tree this script makes from Debian's packages
# (mmdebstrap), entered as its own root (a private mount and PID namespace, pivot_root), with a clean clone of this
# repository's HEAD in it. Nothing of this machine's is in the tree but what a fresh machine of this kind has too:
#   - the base a new machine has (README, "Two commands"): Debian bookworm's minimal system, Python 3 with venv and
#     its headers, gcc/g++, make, cmake, git, CA certificates; and Node.js with npm as this machine has it
#     (copied from its `nodejs` package: Debian's own Node.js 18 is older than the hub's proxy allows);
#   - the machine's package sources: its apt sources, its pip and npm settings and the local wheel and index folders
#     pip's name (read-only), and its extra CA certificates (a network that inspects TLS signs with its own), so
#     pip, npm and apt reach the same registries the same way.
# Not in the tree: any .venv, ~/.cache (so llama.cpp is compiled from nothing), Chromium, bubblewrap,
# fonts-noto-cjk, matplotlib's font cache, or anything else the project might lean on without installing it.
#
#   tools/fresh_machine.sh 'learner: make run' 'root: make run' 'root: make test'
#
# Each step runs in its user's own fresh clone (`learner` has no root, so `make run` cannot install Debian packages
# and must still succeed); the steps run in order and the first failure stops the check with its exit code. The
# numeric kernels are steered to another CPU's (FRESH_CPU, see below), so a test that leans on this CPU's float
# rounding fails here rather than on someone else's machine. The tree is made anew each run in FRESH_ROOT
# (default _build/fresh-machine) and deleted at the end unless FRESH_KEEP=1; FRESH_REUSE=1 enters the kept tree
# again without rebuilding it (the clones are refreshed to HEAD; for trying a step again while developing).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
ROOT=${FRESH_ROOT:-$REPO/_build/fresh-machine}
SUITE=bookworm
MIRROR=${FRESH_MIRROR:-http://deb.debian.org/debian}
BASE=python3,python3-venv,python3-dev,gcc,g++,make,cmake,git,ca-certificates
LEARNER=learner

say() { echo "fresh-machine: $*"; }
[ $# -gt 0 ] || { say "no step given; a step is 'root: CMD' or 'learner: CMD'"; exit 2; }
for step in "$@"; do
  case $step in root:*|learner:*) ;; *) say "step '$step': allowed forms are 'root: CMD' and 'learner: CMD'"; exit 2;; esac
done
[ "$(id -u)" = 0 ] || { say "needs root (it makes a Debian tree and enters it as its root)"; exit 2; }

# ---- the tree -----------------------------------------------------------------------------------------------------
cleanup() { [ "${FRESH_KEEP:-0}" = 1 ] || rm -rf --one-file-system "$ROOT"; }
if [ "${FRESH_REUSE:-0}" = 1 ] && [ -x "$ROOT/usr/bin/python3" ]; then
  say "entering the kept tree $ROOT"
else
  command -v mmdebstrap >/dev/null || { say "installing mmdebstrap"; apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null; }
  rm -rf --one-file-system "$ROOT" && mkdir -p "$(dirname "$ROOT")"
  say "making a minimal Debian $SUITE tree in $ROOT"
  mmdebstrap --quiet --variant=minbase --include="$BASE" "$SUITE" "$ROOT" "$MIRROR"
  # Node.js and npm as this machine has them: the files of its `nodejs` package (nodesource's Node.js 20 on this
  # kind of machine) and its global node_modules whole, since npm may have been upgraded in place (`npm i -g npm`)
  # and then holds files the package does not list (copying the listed ones alone leaves an npm that cannot start).
  dpkg -L nodejs | while read -r f; do case $f in /usr/lib/node_modules/*) continue;; esac
    if [ -f "$f" ] || [ -L "$f" ]; then echo "${f#/}"; fi; done | tar -C / -cf - -T - | tar -C "$ROOT" -xf -
  mkdir -p "$ROOT/usr/lib/node_modules" && cp -a /usr/lib/node_modules/. "$ROOT/usr/lib/node_modules/"
  # The machine's package sources: apt's, and pip's settings as this machine's root sees them (global and user
  # files, and the PIP_* variables, written as one global file), with the folders they point to bound below.
  cp -a /etc/apt/sources.list.d/. "$ROOT/etc/apt/sources.list.d/" 2>/dev/null || true
  if [ -f /etc/apt/sources.list ]; then cp /etc/apt/sources.list "$ROOT/etc/apt/sources.list"
  elif ls /etc/apt/sources.list.d/*.sources >/dev/null 2>&1; then rm -f "$ROOT/etc/apt/sources.list"; fi
  [ -d /etc/xdg/pip ] && mkdir -p "$ROOT/etc/xdg" && cp -a /etc/xdg/pip "$ROOT/etc/xdg/"
  { echo "[global]"; python3 -m pip config list 2>/dev/null | sed -n 's/^\(global\|:env:\)\.\([^=]*\)=\(.*\)$/\2 = \3/p' \
      | sed "s/= '\(.*\)'$/= \1/" | sort -u -t= -k1,1; } > "$ROOT/etc/pip.conf"
  for f in /etc/npmrc /usr/etc/npmrc; do if [ -f "$f" ]; then mkdir -p "$ROOT$(dirname "$f")" && cp "$f" "$ROOT$f"; fi; done
  if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
    cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
    chroot "$ROOT" update-ca-certificates >/dev/null 2>&1
  fi
  chroot "$ROOT" useradd --create-home --shell /bin/bash "$LEARNER"
fi
trap cleanup EXIT

# Fresh clones of HEAD, one per user (what CI clones: committed work only).
for home in root "home/$LEARNER"; do
  rm -rf "$ROOT/$home/course" && git clone -q --no-hardlinks "$REPO" "$ROOT/$home/course"
done
chroot "$ROOT" chown -R "$LEARNER:$LEARNER" "/home/$LEARNER"

# Another CPU's numeric kernels: numpy's and FAISS's OpenBLAS, numpy's own SIMD loops and torch's, capped at AVX2
# (an AMD EPYC of the Zen 2/3 kind has no AVX-512). A kernel choice changes float rounding, not results a test may
# rely on. FRESH_CPU=native keeps this CPU's.
if [ "${FRESH_CPU:-avx2}" = avx2 ]; then
  CPU_ENV="OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 FAISS_OPT_LEVEL=avx2"
  CPU_ENV="$CPU_ENV NPY_DISABLE_CPU_FEATURES=AVX512F,AVX512CD,AVX512_KNL,AVX512_KNM,AVX512_SKX,AVX512_CLX,AVX512_CNL,AVX512_ICL,AVX512_SPR"
else
  CPU_ENV=
fi

# The local folders pip's settings name (find-links, file:// indexes: an index's folder is bound whole, so its
# pages' links to ../packages resolve), bound read-only into the tree.
pip_folders() {
  sed -n 's/^[a-z-]* = //p' "$ROOT/etc/pip.conf" | tr ' ' '\n' | sed -n 's|^file://||; /^\//p' | while read -r d; do
    case $d in */simple|*/simple/) d=$(dirname "${d%/}");; esac
    if [ -d "$d" ]; then echo "$d"; fi
  done | sort -u
}

# ---- entering it ---------------------------------------------------------------------------------------------------
# The steps as one script inside: each as its user, with a clean environment (no variable of this session's).
inner=$(mktemp) && trap 'rm -f "$inner"; cleanup' EXIT
{
  echo 'set -eu; umount -l /.host && rmdir /.host'
  echo 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
  for step in "$@"; do
    who=${step%%:*}; cmd=${step#*:}; cmd=${cmd# }
    if [ "$who" = root ]; then home=/root; else home=/home/$LEARNER; fi
    printf 'echo %q; t0=$(date +%%s)\n' "fresh-machine: [$who] $cmd"
    printf 'cd %q && runuser -u %q -- env -i HOME=%q USER=%q LANG=C.UTF-8 PATH="$PATH" %s bash -c %q || ' \
      "$home/course" "$who" "$home" "$who" "$CPU_ENV" "$cmd"
    printf '{ rc=$?; echo %q; exit $rc; }\n' "fresh-machine: [$who] $cmd failed"
    printf 'echo "fresh-machine: [%s] %s: done in $(( $(date +%%s) - t0 )) s"\n' "$who" "$cmd"
  done
} > "$inner"
cp "$inner" "$ROOT/.fresh-steps"

unshare --mount --pid --fork --kill-child bash -eu -c '
  root=$1
  mount --make-rprivate /
  mount --bind "$root" "$root"
  mount -t proc proc "$root/proc"
  mount --rbind /dev "$root/dev"
  mount --rbind /sys "$root/sys"
  for d in $2; do mkdir -p "$root$d" && mount --bind -o ro "$d" "$root$d"; done
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  cd "$root" && mkdir -p .host && pivot_root . .host
  exec chroot . bash -eu /.fresh-steps
' fresh "$ROOT" "$(pip_folders)"
say "every step passed"
