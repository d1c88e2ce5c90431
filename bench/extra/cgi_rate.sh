#!/bin/bash
# CGI requests per second (brisk, 1 worker, hello.sh) and static latency while slow scripts run.
cd "$(dirname "$0")/../.."
D=$(mktemp -d); mkdir -p $D/cgi; cp www/cgi-bin/hello.sh $D/cgi/; printf '#!/bin/sh\nsleep 2\nprintf "Content-Type: text/plain\\r\\n\\r\\nslow\\n"\n' > $D/cgi/slow.sh; chmod +x $D/cgi/*; echo hi > $D/index.html
taskset -c 0 build/bin/brisk --root $D --cgi /cgi-bin/=$D/cgi --listen 127.0.0.1:17021 --workers 1 --access-log off 2>/dev/null &
pid=$!; sleep 0.4
taskset -c 1 wrk -t1 -c8 -d5s http://127.0.0.1:17021/cgi-bin/hello.sh | grep -E "Requests/sec|Latency|Non-2xx"
# 20 slow scripts in flight; time static requests meanwhile
for i in $(seq 20); do curl -s -o /dev/null http://127.0.0.1:17021/cgi-bin/slow.sh & done
sleep 0.3
for i in 1 2 3 4 5; do curl -s -o /dev/null -w "static during 20 slow scripts: %{time_total}s\n" http://127.0.0.1:17021/index.html; done
wait $(jobs -p | grep -v $pid) 2>/dev/null
kill $pid; wait $pid 2>/dev/null; rm -rf $D
