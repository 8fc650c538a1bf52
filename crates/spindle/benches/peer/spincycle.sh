#!/usr/bin/env bash
# Spin Cycle's `test` request (sleepTime=0: 15 jobs) through two pairs, one after the
# other, each on a fresh MariaDB database, driven by the load generator (`--bench load
# --url ... --poll`, which Spin Cycle's API answers too):
#   1. Spin Cycle 2.1.1's own Request Manager and Job Runner;
#   2. a Spindle Request Manager (`spindle rm`, its store on MariaDB) handing the chains
#      to a Spin Cycle 2.1.1 Job Runner named in its `runners:` (issue #47).
# Usage: crates/spindle/benches/peer/spincycle.sh [COUNT] [CLIENTS]
# Needs ../shared/peers/spincycle-2.1.1 (or SPINDLE_SPINCYCLE_PEER), the MariaDB at
# 127.0.0.1:3306 (root, no password) and a release build (it runs `cargo build --release`).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
repo=$PWD
count=${1:-400}
clients=${2:-8}
peer=${SPINDLE_SPINCYCLE_PEER:-../shared/peers/spincycle-2.1.1}
peer=$(cd "$peer" && pwd)
cargo build --release -q -p spindle
cargo build --release -q -p spindle --benches 2>/dev/null || true
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    mariadb -h127.0.0.1 -uroot -e "DROP DATABASE IF EXISTS sc_bench; DROP DATABASE IF EXISTS spindle_bench" || true
    rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; echo "nothing listens on $1" >&2; exit 1; }
mkdir -p "$work/specs" "$work/rm" "$work/jr" "$work/jr2" "$work/spindle"
cp "$peer/dev-test.yaml" "$work/specs/"
mariadb -h127.0.0.1 -uroot -e "DROP DATABASE IF EXISTS sc_bench; CREATE DATABASE sc_bench; DROP DATABASE IF EXISTS spindle_bench; CREATE DATABASE spindle_bench"
mariadb -h127.0.0.1 -uroot sc_bench < "$peer/request_manager_schema.sql"
load() {
    cargo bench -q -p spindle --bench load -- --url "$1" --poll --specs "$work/specs" --type test \
        --arg "sleepTime=\"0\"" --count "$count" --clients "$clients" --pid "$2" --pid "$3"
}

echo "== Spin Cycle 2.1.1: its Request Manager and Job Runner"
rm_port=$(free_port); jr_port=$(free_port)
export SPINCYCLE_MYSQL_DSN="root:@tcp(127.0.0.1:3306)/sc_bench" SPINCYCLE_SPECS_DIR="$work/specs"
(cd "$work/rm" && SPINCYCLE_SERVER_ADDR=127.0.0.1:$rm_port SPINCYCLE_JR_CLIENT_URL=http://127.0.0.1:$jr_port \
    SPINCYCLE_RM_CLIENT_URL=http://127.0.0.1:$rm_port exec "$peer/bin/request-manager" >out.log 2>&1) &
pids+=($!); sc_rm=$!
(cd "$work/jr" && SPINCYCLE_SERVER_ADDR=127.0.0.1:$jr_port SPINCYCLE_RM_CLIENT_URL=http://127.0.0.1:$rm_port \
    exec "$peer/bin/job-runner" >out.log 2>&1) &
pids+=($!); sc_jr=$!
wait_port "$rm_port"; wait_port "$jr_port"
load "http://127.0.0.1:$rm_port" "$sc_rm" "$sc_jr"
kill -9 "$sc_rm" "$sc_jr"

echo "== a Spindle Request Manager (MariaDB) and a Spin Cycle 2.1.1 Job Runner"
rm_port=$(free_port); jr_port=$(free_port)
printf 'runners:\n  - url: http://127.0.0.1:%s\n    types: [noop, sleep]\n' "$jr_port" >"$work/spindle/rm.yaml"
(cd "$work/spindle" && RUST_LOG=warn exec "$repo/target/release/spindle" rm --config rm.yaml --listen 127.0.0.1:$rm_port \
    --specs "$work/specs" --database mysql://root@127.0.0.1:3306/spindle_bench >out.log 2>&1) &
pids+=($!); sp_rm=$!
(cd "$work/jr2" && SPINCYCLE_SERVER_ADDR=127.0.0.1:$jr_port SPINCYCLE_RM_CLIENT_URL=http://127.0.0.1:$rm_port \
    exec "$peer/bin/job-runner" >out.log 2>&1) &
pids+=($!); sc_jr=$!
wait_port "$rm_port"; wait_port "$jr_port"
load "http://127.0.0.1:$rm_port" "$sp_rm" "$sc_jr"
