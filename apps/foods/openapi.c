/* The OpenAPI 3 document of brisk-foods, served at /api/openapi.json.
 *
 * The document itself is apps/foods/openapi.json, embedded here as a
 * NUL-terminated string at build time (FOODS_OPENAPI_PATH comes from
 * CMake, which also rebuilds this file when the JSON changes). Keep it in
 * step with handlers.c and validate.h: the integration tests check every
 * path, method, status code and limit listed there against the running
 * server. */
#include "foods.h"

#define STR_(x) #x
#define STR(x) STR_(x)

__asm__(".section .rodata\n"
        ".global foods_openapi_json\n"
        ".type foods_openapi_json, @object\n"
        "foods_openapi_json:\n"
        ".incbin \"" STR(FOODS_OPENAPI_PATH) "\"\n"
        ".byte 0\n"
        ".size foods_openapi_json, . - foods_openapi_json\n"
        ".previous\n");
