#!/usr/bin/env bash
# A throwaway single-node Ceph cluster with a RADOS Gateway (S3) on loopback.
#
#   scripts/ceph-rgw.sh start   install the packages if missing, build and start
#                               the cluster, create the S3 test user (idempotent:
#                               a running, answering gateway is left as it is)
#   scripts/ceph-rgw.sh env     print the OBJSTORE_TEST_* exports for the tests
#   scripts/ceph-rgw.sh stop    stop every daemon started here, remove the folder
#
# Everything lives under one folder, $OBJSTORE_CEPH_DIR (default
# /tmp/objstore-ceph): configuration, the one keyring, monitor and OSD data,
# sockets, pid files and logs. One monitor, one memstore OSD (memory only,
# capped at $OBJSTORE_CEPH_MEMSTORE_BYTES), pools of size 1, cephx on, no
# manager daemon, the beast frontend on 127.0.0.1:$OBJSTORE_CEPH_PORT (a free
# port when unset). Needs root for apt-get only.
set -euo pipefail

DIR=${OBJSTORE_CEPH_DIR:-/tmp/objstore-ceph}
TIMEOUT=${OBJSTORE_CEPH_TIMEOUT:-120}
MEMSTORE_BYTES=${OBJSTORE_CEPH_MEMSTORE_BYTES:-2147483648}
ACCESS_KEY=objstore-test-access
SECRET_KEY=objstore-test-secret-0123456789abcdef
RGW=client.rgw.objstore
CONF=$DIR/ceph.conf

log() { echo "ceph-rgw: $*" >&2; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

rgw_answers() {
  [ -f "$DIR/port" ] && curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$(cat "$DIR/port")/"
}

dump_logs() {
  for f in "$DIR"/log/*.log; do
    [ -f "$f" ] || continue
    echo "===== $f (last 60 lines) =====" >&2
    tail -n 60 "$f" >&2
  done
}

# fail MESSAGE: print the message and the daemon logs, stop what was started, exit 1.
fail() {
  log "$*"
  dump_logs
  stop
  exit 1
}

# wait_for SECONDS WHAT COMMAND...: run COMMAND until it succeeds or time runs out.
wait_for() {
  local seconds=$1 what=$2
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      fail "timed out after ${seconds}s waiting for $what"
    fi
    sleep 0.5
  done
}

ceph_cli() { timeout 30 ceph -c "$CONF" --connect-timeout 10 "$@"; }

install_packages() {
  local missing=0
  for bin in radosgw ceph-mon ceph-osd ceph ceph-authtool monmaptool radosgw-admin; do
    command -v "$bin" >/dev/null || missing=1
  done
  [ "$missing" -eq 0 ] && return
  log "installing radosgw ceph-mon ceph-osd"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends radosgw ceph-mon ceph-osd >/dev/null 2>&1 || {
    apt-get update -qq
    apt-get install -y --no-install-recommends radosgw ceph-mon ceph-osd >/dev/null
  }
}

write_conf() {
  local fsid=$1 mon2=$2 mon1=$3 port=$4
  # SSE test keys: fixed, for this throwaway cluster only.
  local kms_key
  kms_key=$(printf 'objstore-test-kms-key-32-bytes!!' | base64)
  cat >"$CONF" <<EOF
[global]
fsid = $fsid
mon initial members = a
mon host = [v2:127.0.0.1:$mon2,v1:127.0.0.1:$mon1]
public network = 127.0.0.0/8
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = $DIR/keyring
run dir = $DIR/run
admin socket = $DIR/run/\$name.asok
pid file = $DIR/run/\$name.pid
log file = $DIR/log/\$name.log
log to stderr = false
err to stderr = true
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
ms bind ipv6 = false

[mon.a]
mon data = $DIR/mon

[osd.0]
osd data = $DIR/osd
osd objectstore = memstore
memstore device bytes = $MEMSTORE_BYTES

[$RGW]
rgw frontends = beast endpoint=127.0.0.1:$port
rgw data = $DIR/rgw
rgw thread pool size = 64
# SSE-C and SSE-KMS over plain HTTP on loopback, with the testing KMS backend.
rgw crypt require ssl = false
rgw crypt s3 kms backend = testing
rgw crypt s3 kms encryption keys = objstore-test-key=$kms_key
EOF
}

start() {
  if alive "$DIR/run/$RGW.pid" && rgw_answers; then
    log "already running on port $(cat "$DIR/port")"
    return
  fi
  if [ -e "$DIR" ]; then
    log "found a stale $DIR: stopping what is left and starting anew"
    stop
  fi
  install_packages
  mkdir -p "$DIR"/{run,log,mon,osd,rgw}
  local fsid osd_uuid mon2 mon1 port
  fsid=$(uuidgen)
  osd_uuid=$(uuidgen)
  mon2=$(free_port)
  mon1=$(free_port)
  port=${OBJSTORE_CEPH_PORT:-$(free_port)}
  echo "$port" >"$DIR/port"
  write_conf "$fsid" "$mon2" "$mon1" "$port"

  local keyring=$DIR/keyring
  ceph-authtool --create-keyring "$keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
  ceph-authtool "$keyring" --gen-key -n client.admin \
    --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null
  ceph-authtool "$keyring" --gen-key -n osd.0 \
    --cap mon 'allow profile osd' --cap osd 'allow *' --cap mgr 'allow profile osd' >/dev/null
  ceph-authtool "$keyring" --gen-key -n "$RGW" \
    --cap mon 'allow rw' --cap osd 'allow rwx' --cap mgr 'allow rw' >/dev/null

  monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon2,v1:127.0.0.1:$mon1]" \
    "$DIR/monmap" >/dev/null
  ceph-mon -c "$CONF" --mkfs -i a --monmap "$DIR/monmap" --keyring "$keyring" ||
    fail "ceph-mon --mkfs failed"
  ceph-mon -c "$CONF" -i a 2>"$DIR/log/mon.a.stderr.log" || fail "ceph-mon did not start"
  wait_for "$TIMEOUT" "the monitor" ceph_cli mon stat

  ceph_cli osd new "$osd_uuid" 0 >/dev/null || fail "ceph osd new failed"
  ceph-osd -c "$CONF" -i 0 --mkfs --osd-uuid "$osd_uuid" >"$DIR/log/osd-mkfs.log" 2>&1 ||
    fail "ceph-osd --mkfs failed"
  ceph-osd -c "$CONF" -i 0 2>"$DIR/log/osd.0.stderr.log" || fail "ceph-osd did not start"
  wait_for "$TIMEOUT" "the OSD to be up" osd_up

  radosgw -c "$CONF" -n "$RGW" 2>"$DIR/log/rgw.stderr.log" || fail "radosgw did not start"
  wait_for "$TIMEOUT" "the gateway on 127.0.0.1:$port" rgw_answers

  timeout 60 radosgw-admin -c "$CONF" user create --uid objstore-test \
    --display-name "objstore tests" --access-key "$ACCESS_KEY" --secret-key "$SECRET_KEY" \
    >"$DIR/log/user-create.log" 2>&1 || fail "radosgw-admin user create failed"
  log "RADOS Gateway serving on http://127.0.0.1:$port (folder $DIR)"
}

osd_up() { ceph_cli osd stat --format json | grep -q '"num_up_osds":1'; }

# stop_daemon NAME: TERM, then KILL whatever still runs after a grace period.
stop_daemon() {
  local pidfile=$DIR/run/$1.pid pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.25
    done
    if kill -0 "$pid" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null || true
      while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    fi
  fi
  rm -f "$pidfile"
}

stop() {
  [ -d "$DIR" ] || return 0
  stop_daemon "$RGW"
  stop_daemon osd.0
  stop_daemon mon.a
  rm -rf "$DIR"
}

print_env() {
  [ -f "$DIR/port" ] || {
    log "not started: run '$0 start' first"
    exit 1
  }
  cat <<EOF
export OBJSTORE_TEST_ENDPOINT=http://127.0.0.1:$(cat "$DIR/port")
export OBJSTORE_TEST_ACCESS_KEY=$ACCESS_KEY
export OBJSTORE_TEST_SECRET_KEY=$SECRET_KEY
export OBJSTORE_TEST_REGION=us-east-1
export OBJSTORE_TEST_SERVER=ceph
EOF
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  env) print_env ;;
  *)
    echo "usage: $0 start|stop|env" >&2
    exit 2
    ;;
esac
