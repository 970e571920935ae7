#!/usr/bin/env bash
# Cloud storage emulators for floe's tests, beside the S3 server (.ci/s3_server.sh):
#   Azure Blob Storage: Azurite (npm package `azurite`), which enforces conditional
#       writes (If-None-Match: *, If-Match) like Azure;
#   Google Cloud Storage: gcp-storage-emulator (PyPI), which ignores conditional
#       writes (x-goog-if-generation-match) and answers no HEAD and no ETag: floe's
#       tests check that floe refuses to write a repository there.
# Both are installed on first use (npm and pip; FLOE_EMULATOR_DIR caches them), bound
# to 127.0.0.1 on free ports, and keep their data in memory.
#
#   source .ci/cloud_emulators.sh; cloud_emulators_start; ...; cloud_emulators_stop
#       starts both in the background, creates the test container and bucket, checks
#       which conditional writes each enforces (.ci/cloudutil.py) and exports:
#         AZURITE_BLOB_STORAGE_URL, AZURE_STORAGE_USE_EMULATOR=true,
#         AZURE_STORAGE_ACCOUNT_NAME / AZURE_STORAGE_ACCOUNT_KEY (Azurite's
#         documented development account), FLOE_TEST_AZURE_CONTAINER;
#         STORAGE_EMULATOR_HOST, FLOE_TEST_GCS_BUCKET.
#   bash .ci/cloud_emulators.sh [COMMAND ARGS...]
#       runs COMMAND with both up, then stops them.
#
# Settings (environment):
#   FLOE_EMULATOR_DIR  install cache (default ${FLOE_VENV_DIR:-/opt/floe-py}/emulators)
#   FLOE_CLOUD_PYTHON  Python 3 used for pip's venv and the helpers (default python3)

cloud_emulators_free_port() {
    "$CLOUD_PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

cloud_emulators_install() {
    local dir="$1"
    mkdir -p "$dir"
    if [[ ! -x "$dir/azurite/node_modules/.bin/azurite-blob" ]]; then
        echo "cloud_emulators: installing azurite (npm) into $dir/azurite"
        npm install --no-audit --no-fund --silent --prefix "$dir/azurite" azurite@3 >"$dir/npm.log" 2>&1 \
            || { tail -n 20 "$dir/npm.log" >&2; return 1; }
    fi
    if [[ ! -x "$dir/gcs/bin/gcp-storage-emulator" ]]; then
        echo "cloud_emulators: installing gcp-storage-emulator (PyPI) into $dir/gcs"
        { "$CLOUD_PY" -m venv --clear "$dir/gcs" \
            && "$dir/gcs/bin/python" -m pip install -q --disable-pip-version-check --no-input \
                gcp-storage-emulator; } >"$dir/pip.log" 2>&1 \
            || { tail -n 20 "$dir/pip.log" >&2; return 1; }
    fi
}

cloud_emulators_start() {
    CLOUD_PY="${FLOE_CLOUD_PYTHON:-python3}"
    local here dir
    here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
    dir="${FLOE_EMULATOR_DIR:-${FLOE_VENV_DIR:-/opt/floe-py}/emulators}"
    cloud_emulators_install "$dir" || return 1
    CLOUD_EMU_DIR="$(mktemp -d "${TMPDIR:-/tmp}/floe-cloud.XXXXXX")"

    local az_port gcs_port
    az_port="$(cloud_emulators_free_port)"
    "$dir/azurite/node_modules/.bin/azurite-blob" --blobHost 127.0.0.1 --blobPort "$az_port" \
        --inMemoryPersistence --skipApiVersionCheck --disableTelemetry \
        >"$CLOUD_EMU_DIR/azurite.log" 2>&1 &
    AZURITE_PID=$!
    gcs_port="$(cloud_emulators_free_port)"
    "$dir/gcs/bin/gcp-storage-emulator" start --host 127.0.0.1 --port "$gcs_port" --in-memory \
        --default-bucket "${FLOE_GCS_BUCKET:-floe-test}" >"$CLOUD_EMU_DIR/gcs.log" 2>&1 &
    GCS_EMU_PID=$!

    export AZURITE_BLOB_STORAGE_URL="http://127.0.0.1:$az_port"
    export AZURE_STORAGE_USE_EMULATOR=true
    export AZURE_STORAGE_ACCOUNT_NAME=devstoreaccount1
    # Azurite's fixed development key, published in its documentation.
    export AZURE_STORAGE_ACCOUNT_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='
    export FLOE_TEST_AZURE_CONTAINER="${FLOE_AZURE_CONTAINER:-floe-test}"
    export STORAGE_EMULATOR_HOST="http://127.0.0.1:$gcs_port"
    export FLOE_TEST_GCS_BUCKET="${FLOE_GCS_BUCKET:-floe-test}"

    if ! "$CLOUD_PY" "$here/cloudutil.py" wait "$AZURITE_BLOB_STORAGE_URL" 60 \
        || ! "$CLOUD_PY" "$here/cloudutil.py" azure-mkcontainer "$FLOE_TEST_AZURE_CONTAINER"; then
        echo "cloud_emulators: Azurite did not start; its log:" >&2
        tail -n 40 "$CLOUD_EMU_DIR/azurite.log" >&2 || true
        cloud_emulators_stop
        return 1
    fi
    if ! "$CLOUD_PY" "$here/cloudutil.py" wait "$STORAGE_EMULATOR_HOST" 60; then
        echo "cloud_emulators: gcp-storage-emulator did not start; its log:" >&2
        tail -n 40 "$CLOUD_EMU_DIR/gcs.log" >&2 || true
        cloud_emulators_stop
        return 1
    fi
    # Which conditional writes each enforces: Azurite must (the Azure tests rely on
    # it); the GCS emulator is expected not to (floe's tests expect a refusal).
    if ! "$CLOUD_PY" "$here/cloudutil.py" azure-check "$FLOE_TEST_AZURE_CONTAINER"; then
        echo "cloud_emulators: Azurite does not enforce conditional writes" >&2
        cloud_emulators_stop
        return 1
    fi
    local rc=0
    "$CLOUD_PY" "$here/cloudutil.py" gcs-check "$FLOE_TEST_GCS_BUCKET" || rc=$?
    if [[ $rc -ne 0 ]]; then
        echo "cloud_emulators: the GCS emulator now enforces conditional writes (or failed, rc $rc):" \
            "update the GCS tests, which expect floe to refuse writes there" >&2
        cloud_emulators_stop
        return 1
    fi
    echo "cloud_emulators: Azurite (pid $AZURITE_PID) on $AZURITE_BLOB_STORAGE_URL," \
        "gcp-storage-emulator (pid $GCS_EMU_PID) on $STORAGE_EMULATOR_HOST"
}

cloud_emulators_stop() {
    local pid
    for pid in "${AZURITE_PID:-}" "${GCS_EMU_PID:-}"; do
        [[ -n "$pid" ]] || continue
        kill "$pid" 2>/dev/null || true
        local _
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    AZURITE_PID=""
    GCS_EMU_PID=""
    if [[ -n "${CLOUD_EMU_DIR:-}" && -d "$CLOUD_EMU_DIR" ]]; then
        rm -rf "$CLOUD_EMU_DIR"
        CLOUD_EMU_DIR=""
    fi
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    set -euo pipefail
    trap cloud_emulators_stop EXIT
    trap 'exit 130' INT TERM
    cloud_emulators_start
    if [[ $# -gt 0 ]]; then
        "$@"
    else
        env | grep -E '^(AZURITE_|AZURE_STORAGE_USE|AZURE_STORAGE_ACCOUNT_NAME|FLOE_TEST_AZURE|STORAGE_EMULATOR|FLOE_TEST_GCS)' | sed 's/^/export /'
        echo "serving until interrupted (Ctrl-C)"
        wait "$AZURITE_PID"
    fi
fi
