#!/usr/bin/env bash
# S3-compatible test server for floe's tests: ministack's S3 (PyPI `ministack`, an
# in-memory AWS emulator) on 127.0.0.1.
#
# Two ways to use it:
#   source .ci/s3_server.sh; s3_server_start; ...; s3_server_stop
#       starts the server in the background, waits until it answers, creates the test
#       bucket and exports FLOE_TEST_S3_BUCKET and the AWS_* variables the tests read.
#       The caller stops it (e.g. from its EXIT trap).
#   bash .ci/s3_server.sh [COMMAND ARGS...]
#       runs COMMAND with the server up (e.g. `cargo test --test integration storage_conformance::`)
#       and stops the server afterwards; without COMMAND, prints the variables and
#       serves until interrupted.
#
# Settings (environment):
#   FLOE_S3_PYTHON   Python with ministack (default ${FLOE_VENV_DIR:-/opt/floe-py}/py311/bin/python)
#   FLOE_S3_PORT     port (default: a free port picked at start)
#   FLOE_S3_BUCKET   bucket to create (default floe-test)

s3_server_start() {
    local py="${FLOE_S3_PYTHON:-${FLOE_VENV_DIR:-/opt/floe-py}/py311/bin/python}"
    local here
    here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
    if ! "$py" -c 'import ministack' 2>/dev/null; then
        echo "s3_server: $py has no ministack (install it with .ci/run)" >&2
        return 1
    fi
    local port="${FLOE_S3_PORT:-}"
    if [[ -z "$port" ]]; then
        port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    fi
    S3_SERVER_DIR="$(mktemp -d "${TMPDIR:-/tmp}/floe-s3.XXXXXX")"
    S3_SERVER_LOG="$S3_SERVER_DIR/ministack.log"
    # In-memory S3 only, bound to loopback; authentication off (any credentials
    # are accepted, requests may still be signed); the SigV4 region scopes buckets.
    env GATEWAY_PORT="$port" BIND_HOST=127.0.0.1 MINISTACK_HOST=127.0.0.1 \
        SERVICES=s3 S3_PERSIST=0 PERSIST_STATE=0 LOG_LEVEL=WARNING \
        MINISTACK_REGION=us-east-1 TMPDIR="$S3_SERVER_DIR" \
        "$py" -m ministack >"$S3_SERVER_LOG" 2>&1 &
    S3_SERVER_PID=$!

    export AWS_ENDPOINT_URL="http://127.0.0.1:$port"
    export AWS_ACCESS_KEY_ID="floe-test-key"
    export AWS_SECRET_ACCESS_KEY="floe-test-secret"
    export AWS_REGION="us-east-1"
    export AWS_DEFAULT_REGION="us-east-1"
    export AWS_ALLOW_HTTP=true
    export FLOE_TEST_S3_BUCKET="${FLOE_S3_BUCKET:-floe-test}"
    unset AWS_SESSION_TOKEN AWS_PROFILE AWS_SKIP_SIGNATURE

    if ! "$py" "$here/s3util.py" wait 60 || ! kill -0 "$S3_SERVER_PID" 2>/dev/null; then
        echo "s3_server: ministack did not start on port $port; its log:" >&2
        tail -n 40 "$S3_SERVER_LOG" >&2 || true
        s3_server_stop
        return 1
    fi
    if ! "$py" "$here/s3util.py" mkbucket "$FLOE_TEST_S3_BUCKET"; then
        tail -n 40 "$S3_SERVER_LOG" >&2 || true
        s3_server_stop
        return 1
    fi
    echo "s3_server: ministack S3 (pid $S3_SERVER_PID) on $AWS_ENDPOINT_URL, bucket $FLOE_TEST_S3_BUCKET, log $S3_SERVER_LOG"
}

s3_server_stop() {
    if [[ -n "${S3_SERVER_PID:-}" ]]; then
        if kill "$S3_SERVER_PID" 2>/dev/null; then
            local _
            for _ in $(seq 1 50); do
                kill -0 "$S3_SERVER_PID" 2>/dev/null || break
                sleep 0.1
            done
            kill -9 "$S3_SERVER_PID" 2>/dev/null || true
        fi
        wait "$S3_SERVER_PID" 2>/dev/null || true
        S3_SERVER_PID=""
    fi
    if [[ -n "${S3_SERVER_DIR:-}" && -d "$S3_SERVER_DIR" ]]; then
        rm -rf "$S3_SERVER_DIR"
        S3_SERVER_DIR=""
    fi
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    set -euo pipefail
    trap s3_server_stop EXIT
    trap 'exit 130' INT TERM
    s3_server_start
    if [[ $# -gt 0 ]]; then
        "$@"
    else
        echo "export AWS_ENDPOINT_URL=$AWS_ENDPOINT_URL AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID" \
            "AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY AWS_REGION=$AWS_REGION" \
            "AWS_ALLOW_HTTP=true FLOE_TEST_S3_BUCKET=$FLOE_TEST_S3_BUCKET"
        echo "serving until interrupted (Ctrl-C)"
        wait "$S3_SERVER_PID"
    fi
fi
