/* The append-only file: every write command in RESP, flushed once per
 * event-loop batch before that batch's replies are sent (fsync per the
 * appendfsync policy), loaded at start, compacted by BGREWRITEAOF in a
 * forked child. */
#ifndef BRISK_KV_AOF_H
#define BRISK_KV_AOF_H

#include "kv/server.h"

#include <sys/types.h>

/* Loads path into the keyspace. Returns 0 (also when the file is absent),
 * or -1 after logging why the server must not start. */
int aof_load(const char *path);
/* Opens the AOF for appending (appendonly yes). Returns 0 or -1. */
int aof_open(void);
/* Appends one command of db to the AOF buffer. */
void aof_feed(kv_db *db, int argc, const bk_str *argv);
/* Writes the buffer, then fsyncs when appendfsync is always. */
void aof_flush(int force_fsync);
/* Starts a rewrite in a child. Returns 0, or -1 with a message in err. */
int aof_rewrite_start(char *err, size_t errlen);
/* Polled from cron: finishes a rewrite whose child exited. */
void aof_check_child(void);
void aof_cron(void);
/* appendonly switched at run time. Returns 0 or -1. */
int aof_set_enabled(int on);
void aof_stop_fsync_thread(void);
void aof_start_fsync_thread(void);
/* MULTI/EXEC framing of a transaction's writes. */
void aof_exec_end(void);
/* One reader for the loader and for --check-aof, so the two can never
 * disagree about a file: RESP framing (multibulk only), known command
 * names, MULTI/EXEC pairing. It streams the file and hands every accepted
 * command to a callback (the loader runs it; the checker only counts). */
enum aof_verdict { AOF_VALID, AOF_TRUNCATED, AOF_BAD, AOF_IO_ERROR };

typedef struct {
    enum aof_verdict verdict;
    off_t size;      /* bytes read */
    off_t good;      /* end of the last whole command outside a MULTI: cutting
                      * the file there keeps every complete write */
    off_t bad_at;    /* AOF_BAD: where the refused command starts */
    int in_multi;    /* AOF_TRUNCATED: the file ends inside a MULTI */
    long long ncmds;
    char why[160];   /* AOF_BAD, AOF_IO_ERROR: what is wrong */
} aof_read_result;

typedef void (*aof_cmd_fn)(void *ud, int argc, bk_str *argv);

/* Reads fd to its end; argv is valid until the callback returns. fn may be
 * NULL (the checker). */
void aof_read(int fd, aof_cmd_fn fn, void *ud, aof_read_result *res);

/* brisk-kv --check-aof [--fix] FILE. Returns the process exit code. */
int aof_check_main(const char *path, int fix);

#endif
