#include <brisk/brisk.h>
int brisk_header_check_dummy;
