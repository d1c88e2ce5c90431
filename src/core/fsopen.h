/* Opening a path that must stay beneath a directory (the docroot, a CGI
 * directory). Errors are negative errno values. */
#ifndef BRISK_CORE_FSOPEN_H
#define BRISK_CORE_FSOPEN_H

/* Opens path relative to dirfd with flags (O_CLOEXEC is added), refusing
 * to leave dirfd: an absolute path, a ".." above it, an absolute symlink or
 * one whose target climbs out give -EXDEV; magic links are refused. Uses
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS); where the kernel or a
 * seccomp filter refuses openat2 (Linux < 5.6, older container runtimes,
 * valgrind 3.19) it walks the path one component at a time with the same
 * rules. "" means dirfd itself. */
int fs_open_beneath(int dirfd, const char *path, int flags);

/* The component walk on its own (what fs_open_beneath falls back to), for
 * the unit tests that hold it to openat2's answers. */
int fs_open_beneath_walk(int dirfd, const char *path, int flags);

#endif
