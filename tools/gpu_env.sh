# Source this on the GPU host (no network): installs the wheels in .whl/ (if any) into
# /tmp/site and puts /tmp/site and the repository root on PYTHONPATH, so that the system
# python3 runs tenferro_cuda from the source tree.
#
#   . tools/gpu_env.sh && python3 -m pytest -q tests
#
# Sourced, so no `set -e` and no `exit` here: failures are reported and returned.

_tf_root="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)"
_tf_py="${GPU_PY:-python3}"
_tf_site="${TENFERRO_SITE:-/tmp/site}"
_tf_rc=0
if compgen -G "$_tf_root/.whl/*.whl" > /dev/null; then
    _tf_stamp="$_tf_site/.tenferro-wheels"
    _tf_want="$(cd "$_tf_root/.whl" && ls -l -- *.whl | sha256sum)"
    if [ ! -f "$_tf_stamp" ] || [ "$(cat "$_tf_stamp")" != "$_tf_want" ]; then
        if "$_tf_py" -m pip install -q --no-index --no-deps --upgrade --target "$_tf_site" \
                "$_tf_root"/.whl/*.whl; then
            printf '%s' "$_tf_want" > "$_tf_stamp"
        else
            echo "gpu_env.sh: installing $_tf_root/.whl/*.whl into $_tf_site failed" >&2
            _tf_rc=1
        fi
    fi
fi
export PYTHONPATH="$_tf_site:$_tf_root${PYTHONPATH:+:$PYTHONPATH}"
unset _tf_py _tf_site _tf_stamp _tf_want _tf_root
_tf_status=$_tf_rc
unset _tf_rc
return "$_tf_status" 2>/dev/null || exit "$_tf_status"
