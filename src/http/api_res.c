/* The public API's response: thin wrappers over the exchange's response
 * calls, and brisk_res_end_file's open. */
#include "http/api.h"

#include "http/files.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void brisk_res_status(brisk_res *res, int status)
{
    http_exchange_status(RES(res), status);
}

void brisk_res_header_n(brisk_res *res, brisk_str name, brisk_str value)
{
    http_exchange_header(RES(res), XSTR(name), XSTR(value));
}

void brisk_res_header(brisk_res *res, const char *name, const char *value)
{
    http_exchange_header(RES(res), (bk_str){ name, strlen(name) }, (bk_str){ value, strlen(value) });
}

void brisk_res_write(brisk_res *res, const void *data, size_t len)
{
    http_exchange_write(RES(res), data, len);
}

void brisk_res_end(brisk_res *res, const void *body, size_t len)
{
    http_exchange_end(RES(res), body, len);
}

void brisk_res_end_str(brisk_res *res, const char *body)
{
    http_exchange_end(RES(res), body, body ? strlen(body) : 0);
}

void brisk_res_end_borrowed(brisk_res *res, const void *body, size_t len,
                            void (*release)(void *arg), void *arg)
{
    http_exchange_end_ref(RES(res), body, len, release, arg);
}

static void close_fd(void *arg)
{
    close((int)(intptr_t)arg);
}

void brisk_res_end_file(brisk_res *res, const char *path)
{
    http_exchange *x = RES(res);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        brisk_res_error(res, errno == EACCES ? 403 : 404);
        return;
    }
    bk_str type = x->has_type ? BK_STR_NULL : mime_lookup(x->conf->mime, (bk_str){ path, strlen(path) });
    http_exchange_end_fd(x, fd, 0, (uint64_t)st.st_size, type, close_fd, (void *)(intptr_t)fd);
}

void brisk_res_error(brisk_res *res, int status)
{
    /* The same page as the errors brisk makes itself: the application's
     * renderer (brisk_on_error) when it has one, else the default page. */
    http_exchange_fail(RES(res), status);
}

int brisk_res_aborted(const brisk_res *res)
{
    return RES(res)->aborted;
}

brisk_loop *brisk_res_loop(brisk_res *res)
{
    return AS_LOOP(RES(res)->hw);
}

void brisk_serve_files(brisk_req *req, brisk_res *res, void *udata)
{
    (void)res;
    http_files_handle(REQ(req), udata);
}
