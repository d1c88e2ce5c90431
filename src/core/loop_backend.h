/* The interface an OS readiness backend implements for loop.c. An io_uring
 * backend would provide the same functions. */
#ifndef BRISK_CORE_LOOP_BACKEND_H
#define BRISK_CORE_LOOP_BACKEND_H

#include "core/loop.h"

int backend_init(bk_loop *l);
void backend_free(bk_loop *l);
enum backend_op { BACKEND_ADD, BACKEND_MOD, BACKEND_DEL };
/* Adds, changes or removes io->fd with the interest mask. Negative errno. */
int backend_ctl(bk_loop *l, bk_io *io, enum backend_op op, unsigned mask);
/* Waits at most timeout_ms (-1 = forever; 0 = just look) and keeps the
 * ready events. Returns their number (0 on timeout or EINTR) or negative errno. */
int backend_wait(bk_loop *l, int timeout_ms);
/* Dispatches the n events backend_wait kept to their io callbacks. */
void backend_dispatch(bk_loop *l, int n);

#endif
