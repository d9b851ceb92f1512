#!/usr/bin/env bash
# Builds the two images -- localhost/tarsy:TAG and localhost/tarsy-llm-service:TAG --
# without a registry and without a container runtime, then checks inside each image
# root that its programs start as uid 10001.
#
#   scripts/build-images.sh            (as root; installs buildah and debootstrap if missing)
#
# How: a Debian bookworm root filesystem from Debian's mirror (debootstrap
# --variant=minbase, trimmed like debian:bookworm-slim, cached) is committed with
# buildah as the base image, standing in for the registry's debian:bookworm-slim and
# python:3.11-slim. Each image's runtime stage is then reproduced on top of it:
# the Dockerfile's RUN steps run with chroot in the mounted container root (no
# `buildah run`, which needs a container runtime), the COPY steps copy what was built
# on the host (the release `tarsy` binary with the dashboard in it) or in the image
# root (the LLM service's virtualenv, made with the image's own python3), and the
# USER/ENV/ENTRYPOINT/CMD lines become `buildah config`. The Dockerfiles stay the
# reference: keep this script in step when they change. The images go to buildah's
# (containers/storage) default store: `buildah images`, `buildah push`.
#
# Differences from `docker build`, by necessity: the base is Debian's own packages,
# not the registry images; the LLM service runs on Debian's python3 (3.11.2,
# /usr/bin) where python:3.11-slim has the newest 3.11.x in /usr/local (the service
# needs >= 3.11), and its virtualenv gets Debian's pip (23.0.1); the release build
# runs on the host's toolchain, in a copy of what the Dockerfile's build stage
# copies. pip inside the image root trusts the host's CA bundle for the build only.
#
# What it proves: both images can be assembled from Debian packages, PyPI and this
# tree, their files, user and configuration are right, and `tarsy --version`,
# `tarsy runner --help` and `tarsy-llm-service --help` run as uid 10001 on a
# read-only root with CA certificates present. What it does not: no container is
# run (no namespaces or cgroups), nothing is pushed, and the registry base images
# themselves are not used.
#
# Environment:
#   TARSY_IMAGES_CACHE     cache (Debian rootfs, .deb downloads, build context);
#                          default ~/.cache/tarsy/images; never inside the clone
#   TARSY_IMAGE_TAG        tag of the images (default dev)
#   TARSY_BUILDAH_DRIVER   buildah storage driver, e.g. vfs where overlay fails
#                          (default: buildah's own default)
#   DEBIAN_MIRROR          default http://deb.debian.org/debian
#   DEBIAN_SECURITY_MIRROR default http://deb.debian.org/debian-security
#   CARGO_TARGET_DIR       default ~/.cache/tarsy/target
# Re-runs reuse the rootfs, the base image, cargo's and npm's caches and the
# downloaded .debs; pip downloads again (no cache, as in the Dockerfile). Each run
# replaces the two images (the old ones are removed).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo="$(pwd -P)"

: "${HOME:=$(getent passwd "$(id -u)" | cut -d: -f6)}"
cache="${TARSY_IMAGES_CACHE:-$HOME/.cache/tarsy/images}"
tag="${TARSY_IMAGE_TAG:-dev}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
security_mirror="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tarsy/target}"
export BUILDAH_ISOLATION=chroot
export npm_config_cache="${npm_config_cache:-$HOME/.cache/tarsy/npm}"
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false

suite=bookworm
# Bump when the base recipe below changes: the cached rootfs is then rebuilt.
base_recipe="tarsy-base-v2 $suite minbase slim-excludes security-upgrade"
base_image="localhost/tarsy-base:$suite"
tarsy_image="localhost/tarsy:$tag"
llm_image="localhost/tarsy-llm-service:$tag"
uid=10001

log() { echo "build-images: $*" >&2; }
die() { log "FAILED: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (debootstrap, chroot and mount need it)"
mkdir -p "$cache"
cache="$(cd "$cache" && pwd -P)"
case "$cache/" in
"$repo"/*) die "the cache ($cache) must be outside the clone" ;;
esac
rootfs="$cache/rootfs-$suite"

buildah_cmd=(buildah)
if [ -n "${TARSY_BUILDAH_DRIVER:-}" ]; then
  buildah_cmd+=(--storage-driver "$TARSY_BUILDAH_DRIVER")
fi
bh() { "${buildah_cmd[@]}" "$@"; }

# ---- step timing ---------------------------------------------------------------
step_names=()
step_secs=()
step_start=0
begin() {
  log "== $1"
  step_names+=("$1")
  step_start="$(date +%s.%N)"
}
end() {
  step_secs+=("$(awk -v a="$step_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')")
}

# ---- mounts and working containers, undone on any exit --------------------------
mounts=()
containers=()
umount_all() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" 2>/dev/null || true
  done
  mounts=()
}
cleanup() {
  local status=$?
  umount_all
  local c
  for c in "${containers[@]}"; do
    bh rm "$c" >/dev/null 2>&1 || true
  done
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Mount points under PREFIX (matching REGEX), deepest first.
mounts_under() {
  awk -v p="$1" '{ m = $2; gsub(/\\040/, " ", m); if (index(m, p) == 1) print m }' \
    /proc/self/mounts | grep -E "${2:-.}" | sort -r || true
}
# What a killed run (no trap) left mounted: under the cache, and ours in buildah's
# container roots. Never rm -rf a tree with /dev bound in it.
umount_stale() {
  local m graphroot
  graphroot="$(bh info --format '{{.store.GraphRoot}}')"
  { mounts_under "$cache/"
    mounts_under "$graphroot/" '/merged/(proc|dev|dev/pts|var/cache/apt/archives|run/host-ca\.crt)$'; } |
    while read -r m; do
      log "unmounting $m (left by an interrupted run)"
      umount "$m" 2>/dev/null || umount -l "$m"
    done
}

mount_into() { # mount_into ROOT  -- what chroot'ed package scripts and programs need
  local root="$1"
  mount -t proc proc "$root/proc"
  mounts+=("$root/proc")
  mount --bind /dev "$root/dev"
  mounts+=("$root/dev")
  mount --bind /dev/pts "$root/dev/pts"
  mounts+=("$root/dev/pts")
}
bind_cache() { # bind_cache HOSTDIR ROOT PATH
  mkdir -p "$1" "$2$3"
  mount --bind "$1" "$2$3"
  mounts+=("$2$3")
}
clean_env=(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive)
in_root() { # in_root ROOT COMMAND...  -- as root, network through the host's resolver
  local root="$1"
  shift
  chroot "$root" "${clean_env[@]}" "$@"
}
with_network() { cp -L /etc/resolv.conf "$1/etc/resolv.conf"; }
without_network() { rm -f "$1/etc/resolv.conf"; }

# A working container from IMAGE, mounted; sets $ctr and $mnt.
working_container() {
  local name="$1" image="$2"
  bh rm "$name" >/dev/null 2>&1 || true # left over by an interrupted run
  ctr="$(bh from --pull-never --name "$name" "$image")"
  containers+=("$ctr")
  mnt="$(bh mount "$ctr")"
}
# Commits $ctr as IMAGE, removing the working container and the image IMAGE named before.
commit() {
  local image="$1" old new
  old="$(bh inspect --type image --format '{{.FromImageID}}' "$image" 2>/dev/null || true)"
  bh umount "$ctr" >/dev/null
  new="$(bh commit --rm --quiet "$ctr" "$image")"
  containers=("${containers[@]/$ctr/}")
  if [ -n "$old" ] && [ "$old" != "$new" ]; then
    bh rmi "$old" >/dev/null 2>&1 || true
  fi
}

# ---- 0. tools -----------------------------------------------------------------
begin "tools (buildah, debootstrap)"
if ! command -v buildah >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then
  log "installing buildah and debootstrap from Debian"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    buildah debootstrap >/dev/null
fi
bh version | sed -n 's/^Version: */buildah /p' >&2
umount_stale
end

# ---- 1. Debian rootfs (cached) ------------------------------------------------
begin "Debian $suite rootfs (debootstrap --variant=minbase, cached)"
if [ "$(cat "$rootfs/.tarsy-recipe" 2>/dev/null || true)" = "$base_recipe" ]; then
  log "reusing $rootfs"
else
  log "debootstrap into $rootfs"
  rm -rf --one-file-system "$rootfs" "$rootfs.tmp"
  debootstrap --variant=minbase "$suite" "$rootfs.tmp" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    { tail -20 "$cache/debootstrap.log" >&2; die "debootstrap (log: $cache/debootstrap.log)"; }
  r="$rootfs.tmp"
  find "$r/var/cache/apt/archives" -name '*.deb' -delete
  cat >"$r/etc/apt/sources.list" <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
deb $security_mirror $suite-security main
EOF
  # As debian:bookworm-slim: no documentation, manual pages or translations.
  cat >"$r/etc/dpkg/dpkg.cfg.d/slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EOF
  find "$r/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  find "$r/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "${r:?}/usr/share/man/"* "${r:?}/usr/share/groff/"* "${r:?}/usr/share/info/"* \
    "${r:?}/usr/share/lintian/"* "${r:?}/usr/share/linda/"* "${r:?}/usr/share/locale/"*
  # Security and point-release updates, as a freshly published base image has them.
  with_network "$r"
  mount_into "$r"
  bind_cache "$cache/apt-archives" "$r" /var/cache/apt/archives
  in_root "$r" sh -c 'apt-get update -qq && apt-get upgrade -y -qq >/dev/null'
  umount_all
  without_network "$r"
  rm -rf "${r:?}/var/lib/apt/lists/"* "${r:?}/var/cache/apt/"*.bin \
    "${r:?}/var/cache/debconf/"*-old "${r:?}/var/log/"*.log "${r:?}/var/log/apt/"* \
    "${r:?}/tmp/"* "${r:?}/dev/"*
  : >"$r/etc/hostname"
  echo "$base_recipe" >"$r/.tarsy-recipe"
  mv "$r" "$rootfs"
fi
end

# ---- 2. base image (the rootfs, committed once per rootfs) ---------------------
begin "base image $base_image"
# The label names the rootfs (recipe and when it was made) and this image's own config.
stamp="$(cat "$rootfs/.tarsy-recipe") $(stat -c %Y "$rootfs/.tarsy-recipe") config-v2"
if [ "$(bh inspect --type image --format '{{index .OCIv1.Config.Labels "io.tarsy.rootfs"}}' \
  "$base_image" 2>/dev/null || true)" = "$stamp" ]; then
  log "reusing $base_image"
else
  bh rm tarsy-base-build >/dev/null 2>&1 || true
  ctr="$(bh from --name tarsy-base-build scratch)"
  containers+=("$ctr")
  mnt="$(bh mount "$ctr")"
  cp -a "$rootfs/." "$mnt/"
  rm -f "$mnt/.tarsy-recipe"
  bh config --os linux --arch "$(dpkg --print-architecture)" \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --label "io.tarsy.rootfs=$stamp" "$ctr"
  commit "$base_image"
fi
end

# ---- 3. the tarsy binary (host build: dashboard, then cargo --release) ----------
begin "dashboard (npm ci, npm run build)"
dist=dashboard/dist/index.html
if [ -f "$dist" ] && [ -z "$(find dashboard/src dashboard/public dashboard/index.html \
  dashboard/package.json dashboard/package-lock.json dashboard/vite.config.ts \
  -newer "$dist" -print -quit 2>/dev/null)" ]; then
  log "dashboard/dist is newer than its sources: not rebuilt"
else
  (cd dashboard && npm ci --no-progress >/dev/null && npm run build >/dev/null)
fi
[ -f "$dist" ] || die "no $dist after the dashboard build"
end

# In a copy of exactly what the Dockerfile's build stage copies (so a file missing
# from its COPY lines fails here too), less what .dockerignore leaves out. Only files
# whose content changed are copied (getting a new time): cargo goes by file times, so
# copying times along (cp -a) could hide a change made before the previous build.
begin "cargo build --release --locked -p tarsy"
context="$cache/context"
mkdir -p "$context"
find Cargo.toml Cargo.lock proto operator kubernetes e2e dashboard/dist \
  \( -name target -o -name node_modules -o -name __pycache__ -o -name .venv \
  -o -name .pytest_cache -o -name '*.egg-info' -o -name '*.pyc' \) -prune \
  -o -type f -print | LC_ALL=C sort >"$cache/context.files"
while IFS= read -r f; do
  if ! cmp -s "$f" "$context/$f"; then
    mkdir -p "$context/$(dirname "$f")"
    cp "$f" "$context/$f"
  fi
done <"$cache/context.files"
(cd "$context" && find . -type f -printf '%P\n' | LC_ALL=C sort) |
  LC_ALL=C comm -23 - "$cache/context.files" |
  (cd "$context" && xargs -r -d '\n' rm -f --)
(cd "$context" && cargo build --release --locked -p tarsy)
tarsy_bin="$CARGO_TARGET_DIR/release/tarsy"
[ -x "$tarsy_bin" ] || die "no $tarsy_bin"
end

# ---- 4. the tarsy image (Dockerfile, runtime stage) ----------------------------
begin "image $tarsy_image"
working_container tarsy-image-build "$base_image"
with_network "$mnt"
mount_into "$mnt"
bind_cache "$cache/apt-archives" "$mnt" /var/cache/apt/archives
# The Dockerfile's RUN line, verbatim.
in_root "$mnt" sh -c 'apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends ca-certificates >/dev/null \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --no-create-home --home-dir /nonexistent tarsy'
umount_all
without_network "$mnt"
rm -f "$mnt/var/cache/apt/"*.bin
# COPY --from=build /out/tarsy /usr/local/bin/tarsy
install -D -m 0755 "$tarsy_bin" "$mnt/usr/local/bin/tarsy"
bh config --user "$uid:$uid" --env TARSY_LOG_JSON=true --env MALLOC_ARENA_MAX=2 \
  --entrypoint '["/usr/local/bin/tarsy"]' --cmd '["--help"]' "$ctr"
commit "$tarsy_image"
end

# ---- 5. the LLM service image (llm-service/Dockerfile) -------------------------
begin "image $llm_image"
working_container tarsy-llm-image-build "$base_image"
with_network "$mnt"
mount_into "$mnt"
bind_cache "$cache/apt-archives" "$mnt" /var/cache/apt/archives
# python:3.11-slim is bookworm-slim plus Python 3.11 (built from source into /usr/local)
# and ca-certificates, netbase, tzdata; here Debian's python3 (3.11) stands in.
in_root "$mnt" sh -c 'apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends python3 python3-venv ca-certificates netbase tzdata >/dev/null \
 && rm -rf /var/lib/apt/lists/*'
# The build stage: its COPY lines, then its RUN line, in the image root itself (the
# sources are removed after; the Dockerfile copies /opt/venv to a fresh stage).
mkdir -p "$mnt/src/proto" "$mnt/src/llm-service"
cp proto/llm_service.proto "$mnt/src/proto/"
cp -r llm-service/pyproject.toml llm-service/setup.py llm-service/constraints.txt \
  llm-service/README.md llm-service/scripts llm-service/src "$mnt/src/llm-service/"
find "$mnt/src" \( -name __pycache__ -o -name '*.egg-info' -o -name build \) -prune -exec rm -rf {} +
rm -f "$mnt/src/llm-service/src/tarsy_llm/proto/"*_pb2*.py
# pip trusts the host's CA bundle (which may hold a TLS-intercepting proxy's CA),
# mounted for the build only: the image keeps Debian's ca-certificates.
host_ca="${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}"
[ -f "$host_ca" ] || die "no CA bundle on the host ($host_ca) for pip in the image root"
: >"$mnt/run/host-ca.crt"
mount --bind -o ro "$host_ca" "$mnt/run/host-ca.crt"
mounts+=("$mnt/run/host-ca.crt")
in_root "$mnt" env PIP_CONSTRAINT=/src/llm-service/constraints.txt \
  PIP_CERT=/run/host-ca.crt PIP_DEFAULT_TIMEOUT="${PIP_DEFAULT_TIMEOUT:-60}" \
  PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_PROGRESS_BAR=off \
  sh -c 'cd /src \
 && python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --quiet ./llm-service \
 && /opt/venv/bin/python -c "import tarsy_llm.proto.llm_service_pb2_grpc"'
umount_all
without_network "$mnt"
rm -rf "${mnt:?}/src" "${mnt:?}/run/host-ca.crt" "${mnt:?}/root/.cache" "${mnt:?}/var/cache/apt/"*.bin "${mnt:?}/tmp/"*
# The runtime stage.
in_root "$mnt" useradd --system --uid 10001 --no-create-home tarsy
bh config --user "$uid" \
  --env PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env LANG=C.UTF-8 --env PYTHONUNBUFFERED=1 --env PYTHONDONTWRITEBYTECODE=1 \
  --env TARSY_LLM_LISTEN=0.0.0.0:50051 --port 50051/tcp \
  --entrypoint '["tarsy-llm-service"]' "$ctr"
commit "$llm_image"
end

# ---- 6. checks inside each committed image's root ------------------------------
# A fresh container of the committed image, its root bind-mounted read-only (as the
# chart runs it: readOnlyRootFilesystem), /proc and /dev mounted, then each check run
# with only the image's environment, as its user: "ARGS" runs the image's entrypoint
# with ARGS, "/PATH ARGS" runs that program of the image.
sizes=()
check_image() {
  local image="$1"
  shift
  local name ro user env_lines entrypoint
  name="tarsy-check-$(echo "$image" | tr -c 'a-z0-9\n' '-')"
  working_container "$name" "$image"
  sizes+=("$(du -sh --apparent-size "$mnt" | cut -f1) $image (root, du)")
  ro="$cache/check-root"
  mkdir -p "$ro"
  mount --bind "$mnt" "$ro"
  mounts+=("$ro")
  mount -o remount,bind,ro "$ro"
  mount_into "$ro"
  user="$(bh inspect --type image --format '{{.OCIv1.Config.User}}' "$image")"
  env_lines="$(bh inspect --type image --format '{{range .OCIv1.Config.Env}}{{println .}}{{end}}' "$image")"
  entrypoint="$(bh inspect --type image --format '{{range .OCIv1.Config.Entrypoint}}{{println .}}{{end}}' "$image")"
  local -a envs ep
  mapfile -t envs <<<"$env_lines"
  mapfile -t ep <<<"$entrypoint"
  [ "$user" = "$uid" ] || [ "$user" = "$uid:$uid" ] || die "$image: USER is '$user', not $uid"
  [ -s "$ro/etc/ssl/certs/ca-certificates.crt" ] ||
    die "$image: no /etc/ssl/certs/ca-certificates.crt"
  # shellcheck disable=SC2016 # expanded by the image's shell
  chroot --userspec="$uid:$uid" "$ro" /usr/bin/env -i "${envs[@]}" \
    sh -c 'test -r /etc/ssl/certs/ca-certificates.crt && test "$(id -u)" = 10001' ||
    die "$image: CA bundle not readable as uid $uid"
  local args
  for args in "$@"; do
    local -a argv
    read -r -a argv <<<"$args"
    case "$args" in
    /*) ;;
    *) argv=("${ep[@]}" "${argv[@]}") ;;
    esac
    local out
    log "$image: ${argv[*]} (uid $uid, read-only root)"
    if ! out="$(chroot --userspec="$uid:$uid" "$ro" /usr/bin/env -i "${envs[@]}" \
      "${argv[@]}" 2>&1)"; then
      echo "$out" >&2
      die "$image: '${argv[*]}' failed"
    fi
    echo "$out" | head -3 | sed 's/^/    /' >&2
  done
  umount_all
  rmdir "$ro"
  bh umount "$ctr" >/dev/null
  bh rm "$ctr" >/dev/null
  containers=("${containers[@]/$ctr/}")
}

begin "checks"
# cp: the operator's init container copies the binary out of this image with it.
check_image "$tarsy_image" "--version" "runner --help" "/bin/cp --version"
check_image "$llm_image" "--help"
end

# ---- 7. report ----------------------------------------------------------------
echo
echo "Images (buildah images):"
bh images --format '{{.Name}}:{{.Tag}}  {{.ID}}  {{.Size}}' |
  grep -E "^($base_image|$tarsy_image|$llm_image)  " | sed 's/^/  /'
echo "Image roots:"
printf '  %s\n' "${sizes[@]}"
echo "Steps (seconds):"
total=0
for i in "${!step_names[@]}"; do
  printf '  %7s  %s\n' "${step_secs[i]}" "${step_names[i]}"
  total="$(awk -v a="$total" -v b="${step_secs[i]}" 'BEGIN { printf "%.1f", a + b }')"
done
printf '  %7s  total\n' "$total"
