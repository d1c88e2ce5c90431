#!/bin/sh
# A CGI script in shell: GET shows the query string, POST echoes the body.
printf 'Content-Type: text/plain; charset=utf-8\r\n\r\n'
if [ "$REQUEST_METHOD" = "POST" ]; then
    echo "You posted $CONTENT_LENGTH bytes:"
    head -c "${CONTENT_LENGTH:-0}"
    echo
else
    echo "Hello from a shell CGI script. QUERY_STRING=$QUERY_STRING"
fi
