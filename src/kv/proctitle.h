/* The process title from proc-title-template (proctitle.c). Main thread. */
#ifndef BRISK_KV_PROCTITLE_H
#define BRISK_KV_PROCTITLE_H

/* At start, before anything else reads argv: returns a heap copy of argv
 * (kept for the process's life) to use from then on, and takes the memory
 * of the original strings (and of the environment's, moved to the heap)
 * for the title. */
char **kv_proctitle_init(int argc, char **argv);
/* Whether a template expands to a non-empty title (known variables only,
 * braces paired): CONFIG SET's check. */
int kv_proctitle_valid(const char *tmpl);
/* Writes the title of the current proc-title-template and configuration. */
void kv_proctitle_update(void);

#endif
