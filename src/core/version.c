#include "internal.h"

/* From the headers this libtack was built with: a program compares them
 * with the macros of the headers it was built with. */
const char *tack_version(void) { return TACK_VERSION_STRING; }

int tack_version_number(void) { return TACK_VERSION_NUMBER; }
