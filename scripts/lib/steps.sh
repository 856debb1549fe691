# Helpers for the set-up scripts (sourced, not run): every step prints one
# line, "setup: WHAT … RESULT, N s"; its own output goes to a log under
# target/setup/ and is shown only when the step fails.

SETUP_LOG_DIR=${SETUP_LOG_DIR:-target/setup}
mkdir -p "$SETUP_LOG_DIR"

# step NAME WHAT CMD…: runs CMD with its output in $SETUP_LOG_DIR/NAME.log.
step() {
  local name=$1 what=$2 t0=$SECONDS log
  shift 2
  log="$SETUP_LOG_DIR/$name.log"
  printf 'setup: %s … ' "$what"
  if "$@" >"$log" 2>&1; then
    printf 'done, %d s\n' $((SECONDS - t0))
  else
    local rc=$?
    printf 'FAILED after %d s (exit %d); the end of %s:\n' $((SECONDS - t0)) "$rc" "$log"
    tail -n 30 "$log" | sed 's/^/  | /'
    exit "$rc"
  fi
}

# skip WHAT REASON: a step with nothing to do.
skip() {
  printf 'setup: %s … %s, 0 s\n' "$1" "$2"
}

# apt_missing PKG…: the packages not installed yet, on stdout.
apt_missing() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

# apt_step WHAT PKG…: installs what is missing of PKG… (one line either way).
apt_step() {
  local what=$1
  shift
  local missing
  missing=$(apt_missing "$@" | tr '\n' ' ')
  if [ -z "${missing// /}" ]; then
    skip "$what ($# Debian packages)" "already installed"
    return
  fi
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  # shellcheck disable=SC2086
  step apt "$what: installing ${missing% }" \
    sh -c "$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing"
}
