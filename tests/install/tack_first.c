/* A Tack user that adopts another DLPack library: Tack's header first, then
 * the upstream one. Compiled as C11 and as C++17 by headers.py, warnings as
 * errors. */
#include <tack/tack.h>
#include <dlpack/dlpack.h>

#include "uses.h"
