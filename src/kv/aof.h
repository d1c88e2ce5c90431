/* The append-only file: every write command in RESP, flushed once per
 * event-loop batch before that batch's replies are sent (fsync per the
 * appendfsync policy), loaded at start, compacted by BGREWRITEAOF in a
 * forked child. */
#ifndef BRISK_KV_AOF_H
#define BRISK_KV_AOF_H

#include "kv/server.h"

#include <sys/types.h>

/* Redis 7.0's multi-part AOF (aof_manifest.c): dir/appenddirname holds
 * the manifest, one base file (RDB or AOF), the incr files commands are
 * appended to, and history files a rewrite left behind. */
enum { AOF_TYPE_BASE = 'b', AOF_TYPE_HIST = 'h', AOF_TYPE_INCR = 'i' };
typedef struct {
    char *name;
    long long seq;
    char type;
} aof_info;
typedef struct {
    aof_info *f; /* in file order */
    int n, cap;
    long long base_seq, incr_seq; /* the highest given out */
} aof_manifest;
/* Reads path; a bad manifest logs Redis's messages and exits(1). */
void aof_manifest_load(const char *path, aof_manifest *am);
void aof_manifest_format(const aof_manifest *am, bk_buf *b);
/* Writes the manifest into appenddirname atomically (temp, fsync, rename,
 * fsync of the directory). Returns 0 or -1 (logged). */
int aof_manifest_persist(const aof_manifest *am);
void aof_manifest_dup(aof_manifest *dst, const aof_manifest *src);
void aof_manifest_free(aof_manifest *am);
aof_info *aof_manifest_base(aof_manifest *am);
aof_info *aof_manifest_last_incr(aof_manifest *am);
int aof_manifest_count(const aof_manifest *am, char type);
/* A new base (the old one becomes history) / a new last incr file; the
 * returned name lives as long as the manifest entry. */
const char *aof_manifest_new_base(aof_manifest *am, int rdb);
const char *aof_manifest_new_incr(aof_manifest *am);
/* Every incr file (but the last one, when keep_last) becomes history. */
void aof_manifest_incr_to_history(aof_manifest *am, int keep_last);
void aof_manifest_drop_history(aof_manifest *am);

/* Loads the AOF files the manifest names (upgrading an old single-file
 * appendfilename in dir first, as Redis 7 does). Returns 0 (also when
 * there is none), or -1 after logging why the server must not start. */
int aof_load_files(void);
/* Reads the manifest only (at start with appendonly no, as Redis 7: a
 * later rewrite continues its numbering; a bad one stops the start). */
void aof_read_manifest(void);
/* After the start-up load with appendonly yes: writes a base when there is
 * no AOF yet, opens the last incr file (or a new one) and persists the
 * manifest. Returns 0 or -1. */
int aof_open(void);
/* Appends one command of db to the AOF buffer. */
void aof_feed(kv_db *db, int argc, const bk_str *argv);
/* Where aof_feed sends a command: AOF_TO_FILE | AOF_TO_REPLICAS (the
 * default, both); a script's redis.set_repl narrows it while it runs. */
enum { AOF_TO_FILE = 1, AOF_TO_REPLICAS = 2 };
extern int aof_feed_targets;
/* DEBUG AOF-FLUSH-SLEEP: microseconds slept before each write of the
 * buffer (Redis's test knob: replies wait for the write). */
extern long long aof_flush_sleep_us;
/* Writes the buffer, then fsyncs when appendfsync is always. */
void aof_flush(int force_fsync);
/* Starts a rewrite in a child. Returns 0, 1 when scheduled for when the
 * running BGSAVE ends, or -1 with a message in err. */
int aof_rewrite_start(char *err, size_t errlen);
/* Deletes the history files the manifest lists (aof-disable-auto-gc no). */
void aof_delete_history(void);
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

/* brisk-kv --check-aof [--fix | --truncate-to-timestamp T] FILE (an AOF
 * file or a manifest), as redis-check-aof. Returns the exit code. */
int aof_check_main(const char *path, int fix, long long truncate_to);

#endif
