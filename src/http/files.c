#include "http/files.h"

#include "http/cgi.h"
#include "http/static.h"

void http_files_handle(http_exchange *x, void *udata)
{
    (void)udata;
    const http_request *r = &x->req;
    if (r->method == HTTP_METHOD_UNKNOWN) {
        x->close = 1; /* as for a request brisk could not parse */
        http_exchange_error(x, 501, NULL);
        return;
    }
    char rel[STATIC_PATH_MAX];
    int dir_form;
    int len = static_normalize_path(r->path, rel, sizeof rel, &dir_form);
    if (len < 0) {
        http_exchange_error(x, -len, NULL);
        return;
    }
    const http_cgi_map *m = http_cgi_match(x->conf, rel, (size_t)len);
    if (m && (size_t)len + 2 == strlen(m->prefix) && !dir_form)
        static_redirect_to_dir(x, r); /* "/cgi-bin" -> "/cgi-bin/", as for a directory */
    else if (m)
        http_cgi_handle(x, r, m, rel, (size_t)len);
    else
        static_serve(x, r, rel, (size_t)len, dir_form);
}
