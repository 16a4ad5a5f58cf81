# Helpers of the CLI test scripts (cli_test.sh, cli_quantize_test.sh), sourced after they set
# CHUTNEY (the tool), TMP (a scratch folder) and failures=0.
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok:   $*"; }

# run NAME EXPECTED_STATUS ARGS...: runs the tool, keeps stdout/stderr in $TMP/NAME.{out,err}.
run() {
  name=$1 expected=$2
  shift 2
  "$CHUTNEY" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
  status=$?
  if [ "$status" -ne "$expected" ]; then
    fail "$name: 'chutney $*' exited $status, expected $expected"
    sed 's/^/    | /' "$TMP/$name.out" "$TMP/$name.err" | tail -20
    return 1
  fi
  return 0
}

# contains NAME FILE-SUFFIX TEXT: the output contains TEXT (fixed string).
contains() {
  if grep -qF -- "$3" "$TMP/$1.$2"; then
    pass "$1: std$2 mentions '$3'"
  else
    fail "$1: std$2 does not mention '$3'"
    sed 's/^/    | /' "$TMP/$1.$2" | tail -20
  fi
}
