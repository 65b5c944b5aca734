#!/usr/bin/env bash
# The whole test suite, from a fresh clone on Debian bookworm, run as root (the installs
# call apt-get directly). Installs what the tests need when it is missing, then:
# formatting, clippy (warnings are errors), every crate's tests, and nvtest's main job on
# both simulated profiles. A missing dependency is a failure, never a skip.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n==> %s\n' "$*"; }

need_apt=()
command -v fio >/dev/null || need_apt+=(fio)
command -v python3 >/dev/null || need_apt+=(python3 python3-pip)
# The Linux-guest lane's recipe (fixtures/guest/build.sh): GNU cpio for the initramfs,
# xz for the kernel image; the Debian packages it boots come with apt-get download.
command -v cpio >/dev/null || need_apt+=(cpio)
command -v xz >/dev/null || need_apt+=(xz-utils)
if ((${#need_apt[@]})); then
  log "installing ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
# QEMU 10.0 from bookworm-backports: the QEMU lanes drive its NVMe controller.
if ! command -v qemu-system-x86_64 >/dev/null; then
  log "installing qemu-system-x86 from bookworm-backports"
  if ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
    cat > /etc/apt/sources.list.d/backports.sources <<'SOURCES'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends -t bookworm-backports qemu-system-x86 >/dev/null
fi
qemu-system-x86_64 --version | head -n 1
if ! python3 -c 'import junitparser' 2>/dev/null; then
  log "installing junitparser (Python) for the JUnit consumer test"
  python3 -m pip install -q junitparser || python3 -m pip install -q --break-system-packages junitparser
fi

if command -v rustup >/dev/null && [[ $'\n'$(rustup target list --installed)$'\n' != *$'\n'x86_64-unknown-linux-gnu$'\n'* ]]; then
  log "adding the x86_64-unknown-linux-gnu target (the guest's static nvtest)"
  rustup target add x86_64-unknown-linux-gnu
fi
log "the Linux-guest lane's kernel and initramfs (fixtures/guest/build.sh; cached in target/guest)"
bash fixtures/guest/build.sh

log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --release -- -D warnings

log "cargo test"
cargo test --workspace --release

log "nvtest main job on the simulated drive (both profiles)"
for profile in enterprise-1.4 enterprise-1.2a; do
  target/release/nvtest --suite namespaces --suite trim --suite qos --suite arbitration --suite claims --suite power-fail \
    --junit "reports/sim-$profile.xml" --json "reports/sim-$profile.json" "sim:$profile"
done
log "nvtest on QEMU's NVMe controller (known QEMU deviations in fixtures/qemu/expected.yaml)"
for topology in ns32 dual; do
  target/release/nvtest --suite namespaces --suite trim --suite qos --suite arbitration --suite claims --suite power-fail \
    --expect fixtures/qemu/expected.yaml --junit "reports/qemu-$topology.xml" --json "reports/qemu-$topology.json" \
    "qemu:$topology"
done
target/release/nvtest --suite power-fail --expect fixtures/qemu/expected.yaml \
  --junit reports/qemu-nocache.xml --json reports/qemu-nocache.json qemu:nocache
log "nvtest on three targets at once, one JUnit report and one JSON record (reports/all.*)"
target/release/nvtest --suite namespaces --suite trim --json reports/all.json --junit reports/all.xml \
  sim sim:enterprise-1.2a qemu:ns32 --expect fixtures/qemu/expected.yaml
log "nvtest in a Linux guest on QEMU, through the kernel's NVMe driver (fixtures/guest/expected.yaml)"
target/release/nvtest --suite namespaces --suite trim --suite qos --suite arbitration --suite claims \
  --expect fixtures/guest/expected.yaml --junit reports/qemu-linux-ns32.xml --json reports/qemu-linux-ns32.json \
  qemu-linux:ns32
target/release/nvtest --suite dual-port --expect fixtures/guest/expected.yaml \
  --junit reports/qemu-linux-dual.xml --json reports/qemu-linux-dual.json qemu-linux:dual
log "all tests passed"
