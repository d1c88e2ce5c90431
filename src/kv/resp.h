/* Resumable RESP2 request parser (multibulk and inline commands).
 *
 * The parser never copies: arguments are (offset, length) pairs into the
 * caller's buffer, so they survive the buffer being re-allocated. State
 * lives in resp_parser, so a command split over many reads is never
 * rescanned from its start. Inline arguments with quotes are unescaped in
 * place (the result is never longer than the text). */
#ifndef BRISK_KV_RESP_H
#define BRISK_KV_RESP_H

#include <stddef.h>
#include <stdint.h>

#define RESP_INLINE_MAX (64 * 1024)       /* longest inline line / count line */
#define RESP_MAX_MULTIBULK (1024 * 1024)  /* most arguments in one command */
#define RESP_MAX_BULK (512ull * 1024 * 1024)

typedef struct {
    size_t off;
    size_t len;
} resp_arg;

enum resp_status { RESP_ERROR = -1, RESP_AGAIN = 0, RESP_CMD = 1 };

typedef struct {
    resp_arg *args; /* owned; grown as needed, reused across commands */
    size_t nargs, cap;
    long long multibulk; /* bulks still to read in this command */
    long long bulklen;   /* length of the bulk being read; -1 = want "$N" */
    size_t pos;          /* offset where parsing continues */
    size_t start;        /* offset where the current command began */
    int kind;            /* 0 = between commands, '*' multibulk, 'i' inline */
    uint64_t max_bulk;   /* limits, set by the owner (defaults above) */
    long long max_multibulk;
    char err[96];        /* the message of the last RESP_ERROR */
} resp_parser;

void resp_parser_init(resp_parser *p);
void resp_parser_free(resp_parser *p);
/* Gives back argument slots past keep (and past the ones in use). */
void resp_parser_shrink(resp_parser *p, size_t keep);

/* Parses from p->pos in buf[0..len). RESP_CMD: args[0..nargs) is one
 * command and p->pos is past it; call resp_parser_next before parsing on.
 * RESP_AGAIN: more bytes are needed. RESP_ERROR: p->err holds the message
 * ("Protocol error: ..."); the connection must be closed. */
int resp_parse(resp_parser *p, char *buf, size_t len);
void resp_parser_next(resp_parser *p);
/* Bytes at the front of the buffer that no longer matter (everything
 * before the command being parsed); the caller may drop them. */
static inline size_t resp_parser_consumed(const resp_parser *p)
{
    return p->kind ? p->start : p->pos;
}
/* The caller removed the first n bytes (n <= resp_parser_consumed). */
void resp_parser_shift(resp_parser *p, size_t n);
/* Bytes the parser needs beyond len to finish the current bulk, or 0. */
size_t resp_parser_want(const resp_parser *p, size_t len);

#endif
