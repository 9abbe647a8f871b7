#!/bin/bash
# Measures the peak RSS of `prunesched serve` (BIN) while six 200 MB bodies are posted at once.
# Needs /tmp/body200.jsonl: 200 MB of JSONL comment lines (python3 -c "open('/tmp/body200.jsonl','wb').write((b'# '+b'x'*1000+b'\n')*204600)").
BIN=$1
D=$(mktemp -d)
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
$BIN serve --data $D --listen 127.0.0.1:$PORT --log-level warn > /dev/null 2>&1 &
SP=$!
for i in $(seq 1 100); do curl -sf http://127.0.0.1:$PORT/readyz >/dev/null && break; sleep 0.2; done
PEAK=0
for i in 1 2 3 4 5 6; do curl -s -o /tmp/six-$i.out -w "%{http_code}\n" -X POST --data-binary @/tmp/body200.jsonl http://127.0.0.1:$PORT/v1/events > /tmp/six-$i.code & done
while [ $(jobs -r | wc -l) -gt 1 ]; do R=$(awk '/VmRSS/{print $2}' /proc/$SP/status); [ "$R" -gt "$PEAK" ] && PEAK=$R; sleep 0.2; done
wait $(jobs -p | grep -v $SP) 2>/dev/null
echo "peak RSS MB: $((PEAK/1024))"; cat /tmp/six-*.code | sort | uniq -c
kill -INT $SP; wait $SP; rm -rf $D
