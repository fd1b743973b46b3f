# shellcheck shell=bash
# SIEM receivers for crates/siem/tests/receivers.rs (sourced by .ci/run):
# - rsyslog (Debian rsyslog + rsyslog-gnutls) in the foreground with its own configuration: a
#   plain TCP input and a TLS input (a test CA generated here with openssl), each writing the
#   raw messages it receives to a file;
# - tenzir (PyPI, cached venv) accepting Splunk HEC and Elasticsearch bulk, written as NDJSON.
# Exports TEST_SYSLOG_TCP, TEST_SYSLOG_TLS, TEST_SYSLOG_CA, TEST_SYSLOG_WRONG_CA,
# TEST_SYSLOG_OUT, TEST_SYSLOG_TLS_OUT, TEST_SYSLOG_PIDFILE, TEST_SYSLOG_START and, when
# tenzir is usable, TEST_HEC_URL, TEST_HEC_TOKEN, TEST_HEC_OUT, TEST_BULK_URL, TEST_BULK_OUT.

siem_peer_rsyslog() {
  if ! command -v rsyslogd >/dev/null 2>&1 || ! ls /usr/lib/*/rsyslog/lmnsd_gtls.so >/dev/null 2>&1; then
    echo "siem peer: installing rsyslog and rsyslog-gnutls"
    apt-get update -qq && apt-get install -y -qq rsyslog rsyslog-gnutls >/dev/null
  fi
  local dir="$ROOT/target/siem-peer"
  rm -rf "$dir"; mkdir -p "$dir/work"
  # A test CA, a server certificate for localhost/127.0.0.1, and an unrelated CA.
  (
    cd "$dir"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=steward-test-ca" \
      -keyout ca.key -out ca.pem >/dev/null 2>&1
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=wrong-ca" \
      -keyout wrong.key -out wrong-ca.pem >/dev/null 2>&1
    openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key \
      -out server.csr >/dev/null 2>&1
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' > ext.cnf
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
      -extfile ext.cnf -out server.pem >/dev/null 2>&1
  )
  local tcp_port tls_port
  tcp_port="$(free_port)"; tls_port="$(free_port)"
  cat > "$dir/rsyslog.conf" <<EOF
global(workDirectory="$dir/work" maxMessageSize="64k"
       DefaultNetstreamDriverCAFile="$dir/ca.pem"
       DefaultNetstreamDriverCertFile="$dir/server.pem"
       DefaultNetstreamDriverKeyFile="$dir/server.key")
module(load="imtcp" maxSessions="200")
template(name="raw" type="string" string="%rawmsg%\n")
input(type="imtcp" port="$tcp_port" address="127.0.0.1" ruleset="plain")
input(type="imtcp" port="$tls_port" address="127.0.0.1" ruleset="tls"
      streamDriver.name="gtls" streamDriver.mode="1" streamDriver.authMode="anon")
ruleset(name="plain") { action(type="omfile" file="$dir/plain.log" template="raw" flushOnTXEnd="on" asyncWriting="off") }
ruleset(name="tls") { action(type="omfile" file="$dir/tls.log" template="raw" flushOnTXEnd="on" asyncWriting="off") }
EOF
  cat > "$dir/start-rsyslog.sh" <<EOF
#!/usr/bin/env bash
# (Re)starts the test rsyslogd in the background; its PID goes to $dir/rsyslog.pid.
rm -f "$dir/rsyslog.pid"
rsyslogd -n -f "$dir/rsyslog.conf" -i "$dir/rsyslog.pid" >>"$dir/rsyslog.out" 2>&1 &
for _ in \$(seq 1 100); do
  python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' $tcp_port 2>/dev/null && exit 0
  sleep 0.1
done
echo "rsyslogd did not start" >&2; exit 1
EOF
  chmod +x "$dir/start-rsyslog.sh"
  rsyslogd -N1 -f "$dir/rsyslog.conf" >/dev/null 2>&1 || { echo "siem peer: invalid rsyslog configuration" >&2; rsyslogd -N1 -f "$dir/rsyslog.conf" >&2; return 1; }
  "$dir/start-rsyslog.sh"
  # A guard that stops whichever rsyslogd the tests (re)started when CI cleans up.
  ( trap 'kill "$(cat "'"$dir"'/rsyslog.pid" 2>/dev/null)" 2>/dev/null; exit 0' TERM INT; while :; do sleep 1; done ) &
  CI_PIDS+=("$!")
  export TEST_SYSLOG_TCP="127.0.0.1:$tcp_port" TEST_SYSLOG_TLS="localhost:$tls_port"
  export TEST_SYSLOG_CA="$dir/ca.pem" TEST_SYSLOG_WRONG_CA="$dir/wrong-ca.pem"
  export TEST_SYSLOG_OUT="$dir/plain.log" TEST_SYSLOG_TLS_OUT="$dir/tls.log"
  export TEST_SYSLOG_PIDFILE="$dir/rsyslog.pid" TEST_SYSLOG_START="$dir/start-rsyslog.sh"
  echo "siem peer: rsyslogd plain tcp $TEST_SYSLOG_TCP, tls $TEST_SYSLOG_TLS (CA $TEST_SYSLOG_CA)"
}

siem_peer_tenzir() {
  local venv
  echo "siem peer: tenzir (.ci/requirements/siem.txt; large, installed once into the cache)"
  venv="$(ci_venv siem "$ROOT/.ci/requirements/siem.txt")" || { echo "siem peer: tenzir not installed; HEC/bulk receiver tests skip" >&2; return 0; }
  if [ ! -x "$venv/bin/tenzir" ]; then
    echo "siem peer: the tenzir package has no tenzir binary; HEC/bulk receiver tests skip" >&2
    return 0
  fi
  local dir="$ROOT/target/siem-peer" hec_port bulk_port
  hec_port="$(free_port)"; bulk_port="$(free_port)"
  export TEST_HEC_TOKEN="steward-test-hec-token"
  "$venv/bin/tenzir" "accept_splunk \"127.0.0.1:$hec_port\", hec_token=\"$TEST_HEC_TOKEN\" | to_file \"$dir/hec.ndjson\", append=true { write_ndjson }" >"$dir/tenzir-hec.log" 2>&1 &
  CI_PIDS+=("$!")
  "$venv/bin/tenzir" "accept_elasticsearch \"127.0.0.1:$bulk_port\" | to_file \"$dir/bulk.ndjson\", append=true { write_ndjson }" >"$dir/tenzir-bulk.log" 2>&1 &
  CI_PIDS+=("$!")
  local port
  for port in "$hec_port" "$bulk_port"; do
    python3 - "$port" <<'PY' || { echo "siem peer: tenzir did not listen on $port (see $dir/tenzir-*.log)" >&2; return 1; }
import socket, sys, time
deadline = time.time() + 60
while time.time() < deadline:
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.3)
sys.exit(1)
PY
  done
  export TEST_HEC_URL="http://127.0.0.1:$hec_port" TEST_HEC_OUT="$dir/hec.ndjson"
  export TEST_BULK_URL="http://127.0.0.1:$bulk_port" TEST_BULK_OUT="$dir/bulk.ndjson"
  echo "siem peer: tenzir HEC $TEST_HEC_URL, bulk $TEST_BULK_URL"
}

siem_peer_rsyslog
siem_peer_tenzir
