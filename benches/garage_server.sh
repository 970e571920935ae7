#!/usr/bin/env bash
# A one-node Garage (an S3-compatible object store written in Rust, on crates.io) on
# loopback, for benchmarks against a server whose listings are not bound by the
# server's CPU as ministack's are (benches/s3_gc.py --endpoint):
#
#   cargo install garage --locked --root DIR     # once; about 20 minutes on 2 cores
#   benches/garage_server.sh DIR/bin/garage WORKDIR
#
# Starts `garage server` in the background (S3 API on 127.0.0.1:3900, region
# us-east-1), gives the node a role, creates the bucket floe-gc-bench and a key with
# access to it, and prints the environment to use:
#
#   export AWS_ACCESS_KEY_ID=GK... AWS_SECRET_ACCESS_KEY=...
#   python benches/s3_gc.py --endpoint 127.0.0.1:3900 --writer icechunk ...
#
# Garage 2.5 does not enforce conditional writes (If-None-Match / If-Match): floe
# refuses to write repositories there, so benchmarks write them with Icechunk
# (--writer icechunk). Stop the server with `kill $(cat WORKDIR/garage.pid)`.
set -euo pipefail
garage=${1:?usage: garage_server.sh GARAGE_BINARY WORKDIR}
work=${2:?usage: garage_server.sh GARAGE_BINARY WORKDIR}
mkdir -p "$work"
work=$(cd "$work" && pwd)
key_id=GK0123456789abcdef01234567
secret=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
cat > "$work/garage.toml" <<EOF
metadata_dir = "$work/meta"
data_dir = "$work/data"
db_engine = "lmdb"
replication_factor = 1
rpc_bind_addr = "127.0.0.1:3901"
rpc_public_addr = "127.0.0.1:3901"
rpc_secret = "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"

[s3_api]
s3_region = "us-east-1"
api_bind_addr = "127.0.0.1:3900"
root_domain = ".s3.garage.localhost"

[admin]
api_bind_addr = "127.0.0.1:3903"
EOF
g() { "$garage" -c "$work/garage.toml" "$@"; }
"$garage" -c "$work/garage.toml" server > "$work/server.log" 2>&1 &
echo $! > "$work/garage.pid"
for _ in $(seq 1 50); do g status > /dev/null 2>&1 && break; sleep 0.2; done
node=$(g node id -q | cut -d@ -f1)
g layout assign -z dc1 -c 10G "$node" > /dev/null
g layout apply --version 1 > /dev/null
g bucket create floe-gc-bench > /dev/null
g key import --yes -n bench "$key_id" "$secret" > /dev/null
g bucket allow --read --write --owner floe-gc-bench --key "$key_id" > /dev/null
echo "export AWS_ACCESS_KEY_ID=$key_id AWS_SECRET_ACCESS_KEY=$secret"
