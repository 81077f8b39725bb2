#!/usr/bin/env bash
# glowviz developer entry point: sets up everything a fresh Debian 12 machine needs, then
#   bash dev.sh ide  [ARGS...]   opens the IDE (default sample model unless ARGS name one)
#   bash dev.sh test [ARGS...]   runs the test suite (ARGS go to pytest)
# Setup is idempotent: system packages only when missing, one .venv, pip only when
# pyproject.toml changed since the last install.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$ROOT"

VENV="$ROOT/.venv"
STAMP="$VENV/.glowviz-install-stamp"
PYTHON="${PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
if [ ! -t 1 ] || [ "${CI:-}" = "true" ]; then
    export PIP_PROGRESS_BAR=off
fi

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'dev.sh: error: %s\n' "$*" >&2; exit 1; }

usage() {
    cat <<'EOF'
usage: bash dev.sh COMMAND [ARGS...]

commands:
  ide   [ARGS...]   set up if needed, then run the IDE: .venv/bin/glowviz ARGS
                    (no ARGS opens the default sample model, sample_models/resnet_small.onnx)
  test  [ARGS...]   set up if needed, then run:
                    .venv/bin/python -m pytest -n 2 --dist worksteal tests ARGS
  setup             only set up: system packages, .venv, pip install -e '.[test]'
  shell             set up, then start a shell with .venv activated
  help              this message

environment: PYTHON (default python3) picks the interpreter used to create .venv.
EOF
}

# --- system packages ---------------------------------------------------------------------

APT_UPDATED=0
apt_install() {
    command -v apt-get >/dev/null 2>&1 \
        || die "missing system packages ($*) and apt-get is not available; install them by hand"
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "need root or sudo to install: $*"
        sudo=(sudo)
    fi
    if [ "$APT_UPDATED" -eq 0 ]; then
        say "updating apt package lists"
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        APT_UPDATED=1
    fi
    say "installing system packages: $*"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

check_python() {
    command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found; glowviz needs Python >= 3.11"
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
        || die "$PYTHON is $("$PYTHON" -V 2>&1); glowviz needs Python >= 3.11"
}

ensure_system_packages() {
    local missing=()
    command -v dot >/dev/null 2>&1 || missing+=(graphviz)
    # AOT bundles (glowviz bundle, examples/bundle and its tests): a C compiler, make, binutils;
    # on x86-64 also an aarch64 cross compiler and qemu-user, to run the aarch64 bundle test.
    command -v cc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
    command -v make >/dev/null 2>&1 || missing+=(make)
    command -v nm >/dev/null 2>&1 && command -v objdump >/dev/null 2>&1 || missing+=(binutils)
    if [ "$(uname -m)" = "x86_64" ]; then
        command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 \
            || missing+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
        command -v qemu-aarch64 >/dev/null 2>&1 || missing+=(qemu-user)
    fi
    if [ "${#missing[@]}" -gt 0 ]; then
        apt_install "${missing[@]}"
    fi
}

# --- virtual environment -----------------------------------------------------------------

venv_ok() {
    [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import pip' >/dev/null 2>&1
}

ensure_venv() {
    if venv_ok; then
        return
    fi
    rm -rf "$VENV"
    say "creating virtual environment in .venv"
    if ! "$PYTHON" -m venv "$VENV" >/dev/null 2>&1 || ! venv_ok; then
        # Debian splits venv/ensurepip out of the interpreter package.
        rm -rf "$VENV"
        apt_install python3-venv python3-pip
        "$PYTHON" -m venv "$VENV" || die "could not create .venv with $PYTHON -m venv"
    fi
}

install_hash() {
    # Re-install when the dependencies or the interpreter change.
    { cat pyproject.toml; "$VENV/bin/python" -VV; } | sha256sum | cut -d' ' -f1
}

ensure_python_packages() {
    local want
    want="$(install_hash)"
    if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
        return
    fi
    say "installing Python packages into .venv (first run takes a minute or two)"
    "$VENV/bin/python" -m pip install -q -e '.[test]'
    printf '%s\n' "$want" >"$STAMP"
    say "setup done"
}

setup() {
    check_python
    ensure_system_packages
    ensure_venv
    ensure_python_packages
}

# --- commands ----------------------------------------------------------------------------

cmd="${1:-}"
if [ $# -gt 0 ]; then
    shift
fi

case "$cmd" in
    ide)
        setup
        if [ $# -eq 0 ] && { [ ! -t 0 ] || [ ! -t 1 ]; }; then
            die "the IDE needs an interactive terminal (stdin/stdout are not a tty)"
        fi
        if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ]; then
            # Python then never caches our modules' bytecode: every start compiled compiler/
            # and glowviz/ from source (+0.3 s of the IDE's start-up). compileall writes it
            # anyway, and only for the files that changed.
            "$VENV/bin/python" -m compileall -q compiler glowviz >/dev/null
        fi
        exec "$VENV/bin/glowviz" "$@"
        ;;
    test)
        setup
        if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ]; then
            # Without bytecode caching every process of the run -- both xdist workers and
            # each CLI, fuzz-worker and export subprocess the tests start -- compiled the
            # project's modules from source: about 2.5 s of CPU a worker for
            # collection alone, 0.2-0.4 s a subprocess. compileall writes the bytecode once
            # (only for the files that changed); the code under test is the same.
            "$VENV/bin/python" -m compileall -q compiler glowviz tests benchmarks >/dev/null
            # pytest's assertion rewriting keeps the rewritten test modules in __pycache__ only
            # when bytecode may be written: with PYTHONDONTWRITEBYTECODE each xdist worker
            # parsed and rewrote every test module again (collection 6.3 -> 3.0 s of CPU a
            # worker without it). The variable goes for the run; compileall has written the
            # project's bytecode just above anyway, and pip the packages'.
            unset PYTHONDONTWRITEBYTECODE
        fi
        exec "$VENV/bin/python" -m pytest -n 2 --dist worksteal tests "$@"
        ;;
    setup)
        setup
        ;;
    shell)
        setup
        say "starting a shell with .venv activated (exit to leave)"
        exec bash --rcfile <(printf '[ -f ~/.bashrc ] && . ~/.bashrc\n. %q\n' "$VENV/bin/activate") -i
        ;;
    "" | help | -h | --help)
        usage
        ;;
    *)
        printf 'dev.sh: unknown command: %s\n\n' "$cmd" >&2
        usage >&2
        exit 2
        ;;
esac
